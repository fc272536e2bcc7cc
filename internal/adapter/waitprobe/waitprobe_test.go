package waitprobe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestPortAndHTTP(t *testing.T) {
	var p Probes
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ok.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	defer bad.Close()
	if !p.HTTP(context.Background(), ok.URL) || p.HTTP(context.Background(), bad.URL) {
		t.Fatal("http: 200 must pass, 500 must not")
	}
	addr := ok.Listener.Addr().(*net.TCPAddr)
	if !p.Port(context.Background(), "127.0.0.1", addr.Port) {
		t.Fatal("a listening port did not pass")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if p.Port(context.Background(), "127.0.0.1", closed) {
		t.Fatal("a closed port passed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p.HTTP(ctx, ok.URL) || p.Port(ctx, "127.0.0.1", addr.Port) {
		t.Fatal("a cancelled probe passed")
	}
}
