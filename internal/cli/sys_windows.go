package cli

import (
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Not yet run on Windows.

// isTerminal reports whether f is a console.
func isTerminal(f *os.File) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) == nil
}

// descriptorLimit is a fixed share: Windows has no small per-process
// limit of open handles (it is in the millions), and the connection
// caps only need to keep clients from using up the engine's.
func descriptorLimit() int { return 16384 }

// posixSignals are the numbers of the signals a conch elsewhere reports
// by name (the gateway or a node on Linux: the numbering of Linux, which
// macOS shares for all of these but SIGBUS, SIGUSR1 and SIGUSR2).
var posixSignals = map[string]int{
	"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGILL": 4, "SIGTRAP": 5, "SIGABRT": 6, "SIGBUS": 7, "SIGFPE": 8,
	"SIGKILL": 9, "SIGUSR1": 10, "SIGSEGV": 11, "SIGUSR2": 12, "SIGPIPE": 13, "SIGALRM": 14, "SIGTERM": 15,
}

// signalNum is the number of the signal named name ("SIGTERM"), or 0.
func signalNum(name string) int { return posixSignals[name] }

// parentIsGoTool reports whether the process that started conch is the
// go command (go.exe), from a Toolhelp snapshot.
func parentIsGoTool() bool {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return false
	}
	defer windows.CloseHandle(snap)
	var e windows.ProcessEntry32
	e.Size = uint32(unsafe.Sizeof(e))
	for err := windows.Process32First(snap, &e); err == nil; err = windows.Process32Next(snap, &e) {
		if int(e.ProcessID) == startPPID {
			name := strings.ToLower(windows.UTF16ToString(e.ExeFile[:]))
			return strings.TrimSuffix(filepath.Base(name), ".exe") == "go"
		}
	}
	return false
}

// exitWithParent calls stop when the process that started conch ends
// (Windows raises no signal for it: a goroutine waits on the parent's
// handle), and returns errParentGone when it has ended already, or when
// its id now names a later process (Windows reuses ids: the parent must
// have been created before this process).
func exitWithParent(stop func()) error {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(startPPID))
	if err != nil {
		return errParentGone
	}
	if !createdBefore(h, windows.CurrentProcess()) {
		windows.CloseHandle(h)
		return errParentGone
	}
	go func() {
		defer windows.CloseHandle(h)
		if ev, err := windows.WaitForSingleObject(h, windows.INFINITE); err == nil && ev == windows.WAIT_OBJECT_0 && stop != nil {
			stop()
		}
	}()
	return nil
}

// createdBefore reports whether process a was created before process b.
func createdBefore(a, b windows.Handle) bool {
	var ca, cb, x, k, u windows.Filetime
	if windows.GetProcessTimes(a, &ca, &x, &k, &u) != nil || windows.GetProcessTimes(b, &cb, &x, &k, &u) != nil {
		return false
	}
	return ca.Nanoseconds() <= cb.Nanoseconds()
}
