package sandbox

import (
	"fmt"
	"net"
	"os"
	"testing"
)

// TestListening reads this process's own socket table (the fallback of
// the in-sandbox port probe without root).
func TestListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if !Listening(os.Getpid(), fmt.Sprintf("127.0.0.1:%d", port)) || !Listening(os.Getpid(), fmt.Sprintf("localhost:%d", port)) {
		t.Fatal("own listener not found")
	}
	if Listening(os.Getpid(), fmt.Sprintf("127.0.0.2:%d", port)) {
		t.Fatal("a listener on 127.0.0.1 matched 127.0.0.2")
	}
	ln6, err := net.Listen("tcp", "[::]:0")
	if err == nil {
		defer ln6.Close()
		p6 := ln6.Addr().(*net.TCPAddr).Port
		if !Listening(os.Getpid(), fmt.Sprintf("127.0.0.1:%d", p6)) {
			t.Fatal("wildcard v6 listener not found")
		}
	}
	ln.Close()
	if Listening(os.Getpid(), fmt.Sprintf("127.0.0.1:%d", port)) {
		t.Fatal("closed listener still found")
	}
}
