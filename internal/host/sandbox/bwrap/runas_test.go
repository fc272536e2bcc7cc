//go:build linux

package bwrap

import (
	"os"
	"syscall"
	"testing"
)

// TestHeldUserns: the gateway makes each idmap user namespace once; a
// stage reopens it only when the reference names that very namespace.
func TestHeldUserns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("idmap user namespaces are made by a root gateway")
	}
	a, err := heldUserns(0, 0, 65534, 65534)
	if err != nil {
		t.Skipf("no user namespaces here: %v", err)
	}
	b, err := heldUserns(0, 0, 65534, 65534)
	if err != nil || *a != *b {
		t.Fatalf("a second run made another namespace: %+v %+v %v", a, b, err)
	}
	c, err := heldUserns(1000, 1000, 65534, 65534)
	if err != nil || c.Ino == a.Ino {
		t.Fatalf("another mapping shares the namespace: %+v %+v %v", a, c, err)
	}
	f, err := openNS(a)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	bad := *a
	bad.Ino++
	if f, err := openNS(&bad); err == nil {
		f.Close()
		t.Fatal("a reference to another inode opened")
	}
	net, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	fi, _ := net.Stat()
	st := fi.Sys().(*syscall.Stat_t)
	if f, err := openNS(&NSRef{PID: os.Getpid(), FD: int(net.Fd()), Dev: uint64(st.Dev), Ino: st.Ino}); err == nil {
		f.Close()
		t.Fatal("a network namespace was taken for a user namespace")
	}
	// A reference that is gone makes a fresh namespace instead.
	gone := &NSRef{PID: os.Getpid(), FD: 999999, Dev: a.Dev, Ino: a.Ino}
	g, err := userns(gone, 0, 0, 65534, 65534)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
}
