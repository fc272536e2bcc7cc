package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
)

// childIO is what a command is created with: its standard handles, or a
// pseudoconsole (then no standard handles: the console provides them).
type childIO struct {
	stdin, stdout, stderr windows.Handle
	console               windows.Handle // HPCON, or 0
}

// createProcess is the one place the Windows supervisor creates a
// command (the Unix one calls exec.Cmd.Start in containment.start). The
// command is created suspended, assigned to job and only then resumed,
// so that nothing it starts can be born outside the job. It inherits
// exactly the handles of io (PROC_THREAD_ATTRIBUTE_HANDLE_LIST), has the
// environment env (envBlock) and the command line of argv as
// windows.ComposeCommandLine quotes it (the rules CommandLineToArgvW and
// the C runtime parse back; cmd.exe, whose own parsing differs, is never
// the shell conch passes a command to). Without a pseudoconsole it gets
// a console process group of its own (CREATE_NEW_PROCESS_GROUP: the
// target of Ctrl+Break). It returns the process and thread handles (the
// thread's already closed). Not yet run on Windows.
func createProcess(path string, argv, env []string, dir string, io childIO, job windows.Handle) (windows.ProcessInformation, error) {
	var pi windows.ProcessInformation
	pathp, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return pi, err
	}
	cmdline, err := windows.UTF16PtrFromString(windows.ComposeCommandLine(argv))
	if err != nil {
		return pi, err
	}
	var dirp *uint16
	if dir != "" {
		if dirp, err = windows.UTF16PtrFromString(dir); err != nil {
			return pi, err
		}
	}
	attrs, err := windows.NewProcThreadAttributeList(1)
	if err != nil {
		return pi, err
	}
	defer attrs.Delete()
	si := windows.StartupInfoEx{}
	si.Cb = uint32(unsafe.Sizeof(si))
	// With a pseudoconsole the standard handles stay 0, and must be
	// named so: without STARTF_USESTDHANDLES the command would take the
	// supervisor's own (the engine's pipes) instead of the console.
	si.Flags = windows.STARTF_USESTDHANDLES
	flags := uint32(windows.CREATE_SUSPENDED | windows.CREATE_UNICODE_ENVIRONMENT | windows.EXTENDED_STARTUPINFO_PRESENT)
	inherit := false
	if io.console != 0 {
		// The attribute's value is the HPCON itself, not its address.
		hpc := *(*unsafe.Pointer)(unsafe.Pointer(&io.console))
		if err := attrs.Update(windows.PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE, hpc, unsafe.Sizeof(io.console)); err != nil {
			return pi, fmt.Errorf("pseudoconsole attribute: %w", err)
		}
	} else {
		flags |= windows.CREATE_NEW_PROCESS_GROUP
		list, closeAll, err := inheritable(io.stdin, io.stdout, io.stderr)
		if err != nil {
			return pi, err
		}
		defer closeAll()
		si.StdInput, si.StdOutput, si.StdErr = list[0], list[1], list[2]
		if err := attrs.Update(windows.PROC_THREAD_ATTRIBUTE_HANDLE_LIST, unsafe.Pointer(&list[0]), uintptr(len(list))*unsafe.Sizeof(list[0])); err != nil {
			return pi, fmt.Errorf("handle list attribute: %w", err)
		}
		inherit = true
	}
	si.ProcThreadAttributeList = attrs.List()
	block := envBlock(env, os.Getenv("SYSTEMROOT"))
	if err := windows.CreateProcess(pathp, cmdline, nil, nil, inherit, flags, &block[0], dirp, &si.StartupInfo, &pi); err != nil {
		return pi, &os.PathError{Op: "CreateProcess", Path: path, Err: err}
	}
	if err := windows.AssignProcessToJobObject(job, pi.Process); err != nil {
		windows.TerminateProcess(pi.Process, killedExitCode)
		windows.CloseHandle(pi.Thread)
		windows.CloseHandle(pi.Process)
		return windows.ProcessInformation{}, fmt.Errorf("assign to the session's job: %w", err)
	}
	if _, err := windows.ResumeThread(pi.Thread); err != nil {
		windows.TerminateProcess(pi.Process, killedExitCode)
		windows.CloseHandle(pi.Thread)
		windows.CloseHandle(pi.Process)
		return windows.ProcessInformation{}, fmt.Errorf("resume: %w", err)
	}
	windows.CloseHandle(pi.Thread)
	return pi, nil
}

// inheritable duplicates hs as inheritable handles (the originals stay
// private to the supervisor); closeAll closes the copies once the child
// has its own.
func inheritable(hs ...windows.Handle) ([]windows.Handle, func(), error) {
	cur := windows.CurrentProcess()
	var out []windows.Handle
	closeAll := func() {
		for _, h := range out {
			windows.CloseHandle(h)
		}
	}
	for _, h := range hs {
		var d windows.Handle
		if err := windows.DuplicateHandle(cur, h, cur, &d, 0, true, windows.DUPLICATE_SAME_ACCESS); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("duplicate handle: %w", err)
		}
		out = append(out, d)
	}
	return out, closeAll, nil
}

// programPath is the program argv0 names: as it is when it is a path,
// else found in the supervisor's PATH with the extensions of PATHEXT
// (what exec.Command does on every system).
func programPath(argv0 string) (string, error) {
	if strings.ContainsAny(argv0, `/\:`) {
		if filepath.Ext(argv0) == "" {
			// CreateProcess adds nothing: find foo.exe for foo.
			if p, err := exec.LookPath(argv0); err == nil {
				return p, nil
			}
		}
		return argv0, nil
	}
	return exec.LookPath(argv0)
}
