package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// DeniedSyscalls fail with EPERM inside every bwrap and landlock sandbox:
// they reach kernel surfaces a command has no business with and that
// have carried privilege escalations (keyrings, BPF, perf, namespaces,
// mounts, modules, io_uring, handle-based opens), or they let one
// process read or steer another (ptrace, process_vm_*: strace and gdb do
// not work inside). clone and clone3 are handled apart (namespaceFlags).
var DeniedSyscalls = []string{
	"unshare", "setns",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd",
	"ptrace", "process_vm_readv", "process_vm_writev",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
	"open_by_handle_at", "name_to_handle_at",
	"reboot", "swapon", "swapoff", "acct", "quotactl",
	// io_uring runs socket and connect operations past this filter.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

// IPCSyscalls are the System V IPC calls (shared memory, message queues,
// semaphores), the ipc(2) multiplexer of the architectures that have one,
// and the POSIX message queue calls. Objects of both kinds belong to an
// IPC namespace, not to a path: bwrap gives each sandbox an IPC namespace
// of its own, so they stay allowed there, but a landlock sandbox that has
// none would reach the host's segments, queues and semaphore sets, so its
// filter refuses them (FilterProgram's extra names). Names the build's
// architecture does not have are left out (ipc on amd64 and arm64).
var IPCSyscalls = []string{
	"shmget", "shmat", "shmdt", "shmctl",
	"msgget", "msgsnd", "msgrcv", "msgctl",
	"semget", "semop", "semtimedop", "semctl",
	"ipc",
	"mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
}

// NativeSyscalls keeps the names this build's architecture has.
func NativeSyscalls(names []string) []string {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		if _, ok := info.SyscallNames[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// namespaceFlags are the clone(2) flags that make new namespaces; clone
// with any of them fails with EPERM. clone3 passes its flags in memory a
// filter cannot read, so it fails with ENOSYS, and the C library falls
// back to clone.
const namespaceFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// FilterProgram assembles the sandbox's seccomp program. denyFamilies are
// socket(2) address families that fail with EPERM; extra names system
// calls refused with EPERM on top of DeniedSyscalls (those the
// architecture lacks are skipped). System calls of
// another architecture (the 32-bit entry points of a 64-bit kernel,
// int 0x80) fail with ENOSYS: the numbers below are the native ones.
func FilterProgram(denyFamilies []uint64, extra ...string) ([]bpf.RawInstruction, error) {
	denied := append(slices.Clone(DeniedSyscalls), NativeSyscalls(extra)...)
	groups := []seccomp.SyscallGroup{{Action: seccomp.ActionErrno, Names: denied},
		{Action: seccomp.ActionErrno, NamesWithCondtions: []seccomp.NameWithConditions{{Name: "clone",
			Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}}}}},
		// Marked ActionLog here, rewritten to ERRNO(ENOSYS) below.
		{Action: seccomp.ActionLog, Names: []string{"clone3"}}}
	var conds []seccomp.NameWithConditions
	for _, af := range denyFamilies {
		conds = append(conds, seccomp.NameWithConditions{Name: "socket", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: af}}})
	}
	if len(conds) > 0 {
		groups = append(groups, seccomp.SyscallGroup{Action: seccomp.ActionErrno, NamesWithCondtions: conds})
	}
	pol := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
	insts, err := pol.Assemble()
	if err != nil {
		return nil, err
	}
	enosys := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
	for i, in := range insts {
		if r, ok := in.(bpf.RetConstant); ok && r.Val == uint32(seccomp.ActionLog) {
			insts[i] = bpf.RetConstant{Val: enosys}
		}
	}
	// The assembled program allows every call of a foreign architecture.
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nativeArch(), SkipTrue: 1},
		bpf.RetConstant{Val: enosys},
	}
	guard = append(guard, ttyIoctlGuard()...)
	return bpf.Assemble(append(guard, insts...))
}

// DeniedIoctls are the ioctl(2) requests that fail with EPERM inside
// every bwrap and landlock sandbox: TIOCSTI pushes bytes into a
// terminal's input as if typed there, and TIOCLINUX's paste does the same
// on a virtual console, so a command holding a descriptor of a terminal
// some shell outside reads from could type commands into that shell
// (CVE-2017-5226 for bwrap; the reason bwrap has --new-session). The
// kernel reads the request as a 32-bit number (ioctl's cmd is an
// unsigned int), so the filter compares the low 32 bits only: a request
// with high bits set (0x100005412) is still TIOCSTI to the kernel.
var DeniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// ttyIoctlGuard refuses DeniedIoctls with EPERM and falls through for
// every other call. It runs after the architecture check, on the native
// ioctl number only (an x32 call has another number, which the assembled
// program refuses).
func ttyIoctlGuard() []bpf.Instruction {
	eperm := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EPERM)
	// seccomp_data: nr (4), arch (4), instruction_pointer (8), args[6]
	// (8 each). The low half of args[1] is its first word on a
	// little-endian machine and its second on a big-endian one.
	low := uint32(16 + 8)
	if bigEndian() {
		low += 4
	}
	n := len(DeniedIoctls)
	out := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(unix.SYS_IOCTL), SkipFalse: uint8(n + 3)},
		bpf.LoadAbsolute{Off: low, Size: 4},
	}
	for i, req := range DeniedIoctls {
		// Matched: jump to the RetConstant after the list.
		out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: req, SkipTrue: uint8(n - i)})
	}
	// No match: skip the return. The assembled program reloads nr itself.
	out = append(out, bpf.Jump{Skip: 1}, bpf.RetConstant{Val: eperm})
	return out
}

func bigEndian() bool {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	return b[0] == 0
}

// nativeArch is the AUDIT_ARCH value of this build.
func nativeArch() uint32 {
	return map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64,
		"riscv64": unix.AUDIT_ARCH_RISCV64, "ppc64le": unix.AUDIT_ARCH_PPC64LE, "s390x": unix.AUDIT_ARCH_S390X,
		"386": unix.AUDIT_ARCH_I386, "arm": unix.AUDIT_ARCH_ARM, "loong64": unix.AUDIT_ARCH_LOONGARCH64}[runtime.GOARCH]
}

// LoadFilter sets no_new_privs and loads raw on every thread of this
// process.
func LoadFilter(raw []bpf.RawInstruction) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(raw)), Filter: (*unix.SockFilter)(unsafe.Pointer(&raw[0]))}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return errno
	}
	return nil
}

// ProbeSyscall makes one call of the named system call with arguments
// that do nothing (zeros, or an invalid combination the kernel rejects
// before acting) and returns its error's name (EPERM, EINVAL, …), "ok",
// or "unknown". `conch sandbox-init --probe syscall NAME` prints it, so
// tests can check the filter from inside a sandbox. clone is called with
// CLONE_NEWUSER|CLONE_FS, which the kernel refuses with EINVAL and a
// filter with EPERM.
func ProbeSyscall(name string) string {
	info, err := arch.GetInfo("")
	if err != nil {
		return "unknown"
	}
	nr, ok := info.SyscallNames[name]
	if !ok {
		return "unknown"
	}
	var a [6]uintptr
	switch name {
	case "clone":
		a[0] = unix.CLONE_NEWUSER | unix.CLONE_FS
	case "unshare":
		a[0] = unix.CLONE_NEWUSER
	case "ptrace":
		a[0] = unix.PTRACE_TRACEME
	case "userfaultfd":
		a[0] = 1 // UFFD_USER_MODE_ONLY
	case "acct", "swapon", "swapoff", "umount2", "delete_module", "pivot_root", "init_module":
		a[0] = 1 // a pointer that faults
	}
	if slices.Contains(IPCSyscalls, name) {
		// Key or id -1 with no flags: the *get calls find no object
		// (ENOENT) and create none, the others refuse the id (EINVAL),
		// the descriptor (EBADF) or the name's pointer (EFAULT). An id
		// of 0 could be a real segment, and shmctl(0, IPC_RMID) would
		// remove it.
		a[0] = ^uintptr(0)
	}
	_, _, errno := unix.Syscall6(uintptr(nr), a[0], a[1], a[2], a[3], a[4], a[5])
	if errno == 0 {
		return "ok"
	}
	if n := unix.ErrnoName(errno); n != "" {
		return n
	}
	return fmt.Sprintf("errno%d", int(errno))
}

// ProbeTIOCSTI pushes one byte into a terminal's input with
// ioctl(fd, req, &b), req being TIOCSTI or TIOCSTI with high bits set, on
// descriptor 0 and on /dev/tty (the controlling terminal), and reports
// each outcome as "fd0=ERR tty=ERR" (ERR an error name such as EPERM or
// ENOTTY, "ok" when the byte went in; tty=ENXIO: no controlling
// terminal). `conch sandbox-init --probe tiocsti REQ` prints it.
func ProbeTIOCSTI(req uint64) string {
	b := byte(' ')
	name := func(errno unix.Errno) string {
		if errno == 0 {
			return "ok"
		}
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
		return fmt.Sprintf("errno%d", int(errno))
	}
	call := func(fd int) string {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&b)))
		return name(errno)
	}
	out := "fd0=" + call(0)
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		errno, _ := err.(unix.Errno)
		return out + " tty=" + name(errno)
	}
	defer unix.Close(fd)
	return out + " tty=" + call(fd)
}
