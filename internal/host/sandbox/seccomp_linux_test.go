package sandbox

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

func TestFilterProgramRefusesForeignArch(t *testing.T) {
	raw, err := FilterProgram(nil)
	if err != nil {
		t.Fatal(err)
	}
	// ld arch; jeq native; ret ERRNO(ENOSYS)
	if len(raw) < 3 || raw[0].K != 4 || raw[1].K != nativeArch() || raw[2].K&0xffff != 38 {
		t.Fatalf("program does not start with the architecture guard: %v", raw[:3])
	}
}

// TestFilterProgramDecisions runs the assembled program in a BPF
// interpreter over generated inputs: every denied call by its native
// number fails with EPERM and by its x32 number (nr | 0x40000000) never
// passes; a foreign architecture gets ENOSYS; clone fails with EPERM for
// each namespace flag alone and passes without one; clone3 gets ENOSYS;
// denied socket families fail, others pass.
func TestFilterProgramDecisions(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the generated inputs use amd64 numbers")
	}
	raw, err := FilterProgram([]uint64{unix.AF_VSOCK})
	if err != nil {
		t.Fatal(err)
	}
	insts, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("disassemble")
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	// struct seccomp_data with each 32-bit word big-endian: the
	// interpreter loads big-endian where the kernel loads native words.
	run := func(nr, archID uint32, args ...uint64) uint32 {
		b := make([]byte, 64)
		binary.BigEndian.PutUint32(b[0:], nr)
		binary.BigEndian.PutUint32(b[4:], archID)
		for i, a := range args {
			binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
			binary.BigEndian.PutUint32(b[16+8*i+4:], uint32(a>>32))
		}
		v, err := vm.Run(b)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(v)
	}
	allow, eperm, enosys := uint32(unix.SECCOMP_RET_ALLOW), uint32(unix.SECCOMP_RET_ERRNO)|uint32(unix.EPERM), uint32(unix.SECCOMP_RET_ERRNO)|uint32(unix.ENOSYS)
	native := uint32(unix.AUDIT_ARCH_X86_64)
	for _, name := range DeniedSyscalls {
		nr, ok := info.SyscallNames[name]
		if !ok {
			continue
		}
		if got := run(uint32(nr), native); got != eperm {
			t.Errorf("%s: %#x, want EPERM", name, got)
		}
		if got := run(uint32(nr)|0x40000000, native); got == allow {
			t.Errorf("%s by its x32 number passes", name)
		}
		if got := run(uint32(nr), unix.AUDIT_ARCH_I386); got != enosys {
			t.Errorf("%s from i386: %#x", name, got)
		}
	}
	clone, clone3, socket, getpid := uint32(unix.SYS_CLONE), uint32(unix.SYS_CLONE3), uint32(unix.SYS_SOCKET), uint32(unix.SYS_GETPID)
	for _, bit := range []uint64{unix.CLONE_NEWUSER, unix.CLONE_NEWNS, unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWUTS,
		unix.CLONE_NEWIPC, unix.CLONE_NEWCGROUP, unix.CLONE_NEWTIME} {
		if got := run(clone, native, bit|uint64(unix.SIGCHLD)); got != eperm {
			t.Errorf("clone %#x: %#x", bit, got)
		}
	}
	for _, c := range []struct {
		nr   uint32
		args []uint64
		want uint32
	}{
		{clone, []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD}, allow},
		{clone3, nil, enosys}, {getpid, nil, allow},
		{socket, []uint64{unix.AF_VSOCK}, eperm}, {socket, []uint64{unix.AF_UNIX}, allow}, {socket, []uint64{unix.AF_INET}, allow},
		{getpid | 0x40000000, nil, enosys},
	} {
		if got := run(c.nr, native, c.args...); got != c.want {
			t.Errorf("nr %d %v: %#x, want %#x", c.nr, c.args, got, c.want)
		}
	}
	// ioctl: each denied request fails whatever its high 32 bits (the
	// kernel ignores them), on any descriptor; its neighbours and other
	// terminal requests pass, high bits or not; the x32 ioctl never passes.
	ioctl := uint32(unix.SYS_IOCTL)
	highs := []uint64{0, 1 << 32, 0xffffffff << 32, 0x80000000 << 32}
	for _, req := range DeniedIoctls {
		for _, hi := range highs {
			for _, fd := range []uint64{0, 1, 255, 1<<32 | 3} {
				if got := run(ioctl, native, fd, hi|uint64(req)); got != eperm {
					t.Errorf("ioctl(%d, %#x): %#x, want EPERM", fd, hi|uint64(req), got)
				}
			}
		}
		if got := run(ioctl|0x40000000, native, 0, uint64(req)); got == allow {
			t.Errorf("x32 ioctl %#x passes", req)
		}
		if got := run(ioctl, unix.AUDIT_ARCH_I386, 0, uint64(req)); got != enosys {
			t.Errorf("i386 ioctl %#x: %#x", req, got)
		}
	}
	for _, req := range []uint64{unix.TIOCSTI - 1, unix.TIOCSTI + 1, unix.TIOCLINUX - 1, unix.TIOCLINUX + 1,
		unix.TCGETS, unix.TIOCGWINSZ, unix.TIOCSCTTY, unix.TIOCSPGRP, unix.TIOCINQ} {
		for _, hi := range highs {
			if got := run(ioctl, native, 0, hi|req); got != allow {
				t.Errorf("ioctl(0, %#x): %#x, want allow", hi|req, got)
			}
		}
	}
	// The request compared is the second argument, not the first.
	if got := run(ioctl, native, unix.TIOCSTI, unix.TCGETS); got != allow {
		t.Errorf("ioctl(TIOCSTI as fd, TCGETS): %#x", got)
	}
}
