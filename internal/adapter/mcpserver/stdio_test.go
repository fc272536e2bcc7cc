package mcpserver

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestStdioAnswered: Answered waits for a response to every call read,
// whatever the framing (split lines, batches), ignores notifications and
// the server's own requests, and counts a cancelled call as answered.
func TestStdioAnswered(t *testing.T) {
	s := NewStdio(nil, nil)
	in := func(line string) { s.feed(&s.in, []byte(line), true) }
	out := func(line string) { s.feed(&s.out, []byte(line), false) }
	quiet := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return s.Answered(ctx)
	}
	if err := quiet(); err != nil {
		t.Fatalf("nothing read: %v", err)
	}
	in(`{"jsonrpc":"2.0","id":1,"method":"tools/`)
	in("call\"}\n" + `[{"jsonrpc":"2.0","id":"a","method":"tools/call"},{"jsonrpc":"2.0","method":"notifications/initialized"}]` + "\n")
	out(`{"jsonrpc":"2.0","id":7,"method":"elicitation/create"}` + "\n") // the server's request
	in(`{"jsonrpc":"2.0","id":7,"result":{}}` + "\n")                    // and its answer
	if err := quiet(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("two calls unanswered: %v", err)
	}
	in(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}` + "\n")
	done := make(chan error, 1)
	go func() { done <- s.Answered(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Answered returned with call 1 unanswered: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	out(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` + "\n")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Answered did not return once every call was answered")
	}
}

// TestStdioAnsweredNumberIDs: a request whose id is a fraction is answered
// by the SDK with the id as an integer; that still counts as its answer.
func TestStdioAnsweredNumberIDs(t *testing.T) {
	s := NewStdio(nil, nil)
	s.feed(&s.in, []byte(`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`+"\n"), true)
	s.feed(&s.out, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"), false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Answered(ctx); err != nil {
		t.Fatalf("id 1.5 answered as 1: %v", err)
	}
}
