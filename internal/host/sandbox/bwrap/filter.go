//go:build linux

package bwrap

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/host/sandbox"
	"golang.org/x/sys/unix"
)

// BwrapFilter is the seccomp program (struct sock_filter[]) bwrap loads
// with --seccomp for a run with or without network.
func BwrapFilter(home string, network bool) string {
	name := "bwrap-nonet.bpf"
	if network {
		name = "bwrap-net.bpf"
	}
	return filepath.Join(home, "sandboxes", name)
}

// writeBwrapFilter writes BwrapFilter(home, network): the denied system
// calls, and without network socket(AF_VSOCK), which ignores network
// namespaces (in a VM it reaches the hypervisor's services).
func writeBwrapFilter(home string, network bool) error {
	var fams []uint64
	if !network {
		fams = append(fams, unix.AF_VSOCK)
	}
	raw, err := sandbox.FilterProgram(fams)
	if err != nil {
		return err
	}
	b := make([]byte, 8*len(raw))
	for i, in := range raw {
		binary.NativeEndian.PutUint16(b[8*i:], in.Op)
		b[8*i+2], b[8*i+3] = in.Jt, in.Jf
		binary.NativeEndian.PutUint32(b[8*i+4:], in.K)
	}
	p := BwrapFilter(home, network)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, b) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return fsutil.WriteFile(p, b, 0o600)
}
