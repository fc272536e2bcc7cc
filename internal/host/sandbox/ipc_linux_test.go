package sandbox

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestFilterProgramIPC: with IPCSyscalls as extra names (landlock's
// filter) every one the architecture has fails with EPERM; without them
// (bwrap's, whose runs have an IPC namespace of their own) they pass.
func TestFilterProgramIPC(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the inputs use amd64 numbers")
	}
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	names := NativeSyscalls(IPCSyscalls)
	if len(names) < 18 {
		t.Fatalf("only %v of %v are known on amd64", names, IPCSyscalls)
	}
	for _, extra := range [][]string{nil, IPCSyscalls} {
		raw, err := FilterProgram(nil, extra...)
		if err != nil {
			t.Fatal(err)
		}
		insts, _ := bpf.Disassemble(raw)
		vm, err := bpf.NewVM(insts)
		if err != nil {
			t.Fatal(err)
		}
		want := uint32(unix.SECCOMP_RET_ALLOW)
		if extra != nil {
			want = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EPERM)
		}
		for _, n := range names {
			b := make([]byte, 64)
			binary.BigEndian.PutUint32(b[0:], uint32(info.SyscallNames[n]))
			binary.BigEndian.PutUint32(b[4:], unix.AUDIT_ARCH_X86_64)
			v, err := vm.Run(b)
			if err != nil {
				t.Fatal(err)
			}
			if uint32(v) != want {
				t.Errorf("extra %v: %s gives %#x, want %#x", extra != nil, n, v, want)
			}
		}
	}
}
