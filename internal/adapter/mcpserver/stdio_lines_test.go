package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioPeer runs an SDK server on a Stdio transport over pipes and talks
// to it line by line.
type stdioPeer struct {
	t   *testing.T
	in  *io.PipeWriter
	out *bufio.Reader
	end chan error
}

func newStdioPeer(t *testing.T) *stdioPeer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	st := NewStdio(inR, outW)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	p := &stdioPeer{t: t, in: inW, out: bufio.NewReaderSize(outR, 1<<20), end: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { p.end <- srv.Run(ctx, st.Transport()) }()
	t.Cleanup(func() { cancel(); inW.Close(); outR.Close() })
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := p.read(); m["id"] != float64(0) || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return p
}

func (p *stdioPeer) send(line string) {
	p.t.Helper()
	done := make(chan error, 1)
	go func() { _, err := io.WriteString(p.in, line+"\n"); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Fatalf("write: %v (the session ended: %v)", err, p.ended())
		}
	case <-time.After(30 * time.Second):
		p.t.Fatal("write blocked for 30 s")
	}
}

func (p *stdioPeer) ended() error {
	select {
	case err := <-p.end:
		return fmt.Errorf("ended: %v", err)
	default:
		return nil
	}
}

func (p *stdioPeer) read() map[string]any {
	p.t.Helper()
	type res struct {
		line string
		err  error
	}
	c := make(chan res, 1)
	go func() { l, err := p.out.ReadString('\n'); c <- res{l, err} }()
	select {
	case r := <-c:
		var m map[string]any
		if err := json.Unmarshal([]byte(r.line), &m); err != nil {
			p.t.Fatalf("read %q: %v %v (session: %v)", r.line, r.err, err, p.ended())
		}
		return m
	case <-time.After(30 * time.Second):
		p.t.Fatalf("no answer within 30 s (session: %v)", p.ended())
	}
	return nil
}

// TestStdioBadLinesAnswered: no line a client writes ends the session. The
// SDK alone ends it at the first line that is not JSON, not a JSON-RPC
// message it takes, or over its size limit, cutting every call in flight;
// each such line is answered with a JSON-RPC error (its id where one can
// be found) and the next request is served. The lines are generated: every
// class below, and every cut of a valid request.
func TestStdioBadLinesAnswered(t *testing.T) {
	p := newStdioPeer(t)
	big := strings.Repeat("x", MaxStdioMessageBytes)
	cases := []struct {
		line string
		code float64
		id   any // nil: null
	}{
		{"hello", -32700, nil},
		{`{"jsonrpc":"2.0","id":9,"method":"ping"`, -32700, nil},
		{`{"jsonrpc":"2.0","id":9,"method":"ping"} {"x":1}`, -32700, nil},
		{`{"jsonrpc":"2.0","id":9,"method":"ping"}{"jsonrpc":"2.0","id":10,"method":"ping"}`, -32700, nil},
		{`[]`, -32600, nil},
		{`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`, -32600, nil},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil},
		{`{"jsonrpc":"2.0","id":[1],"method":"ping"}`, -32600, nil},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, -32600, nil},
		{`{"jsonrpc":"1.0","id":5,"method":"ping"}`, -32600, float64(5)},
		{`{"id":"s","method":"ping"}`, -32600, "s"},
		{`"str"`, -32600, nil},
		{`123`, -32600, nil},
		{`null`, -32600, nil},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"data":"` + big + `"}}}`, -32600, float64(7)},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x","arguments":{"data":"` + big + `"}},"id":"tail"}`, -32600, "tail"},
		{`{"data":"` + big + `"}`, -32600, nil},
		{"\xff\xfe", -32700, nil},
	}
	valid := `{"jsonrpc":"2.0","id":"cut","method":"ping"}`
	for i := 1; i < len(valid); i++ {
		if cut := valid[:i]; strings.TrimSpace(cut) != "" {
			cases = append(cases, struct {
				line string
				code float64
				id   any
			}{cut, -32700, nil})
		}
	}
	for i, c := range cases {
		p.send(c.line)
		m := p.read()
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != c.code || m["id"] != c.id {
			t.Errorf("line %d %.80q: got %v, want code %v id %v", i, c.line, m, c.code, c.id)
		}
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 1000+i))
		if m := p.read(); m["id"] != float64(1000+i) || m["result"] == nil {
			t.Fatalf("ping after line %d %.80q: %v", i, c.line, m)
		}
	}
	// A response to no request is dropped by the SDK, and the session
	// goes on.
	p.send(`{"jsonrpc":"2.0","id":"nothing","result":{}}`)
	// Blank lines are skipped; a message split by \r\n is taken.
	p.send("")
	p.send(`{"jsonrpc":"2.0","id":"crlf","method":"ping"}` + "\r")
	if m := p.read(); m["id"] != "crlf" || m["result"] == nil {
		t.Fatalf("a CRLF line: %v", m)
	}
}
