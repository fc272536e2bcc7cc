package supervisor

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/windows"
)

// ptyState is a session's pseudoconsole (ConPTY, Windows 10 1809 and
// later): the console the command is attached to, the pipe its input is
// written to, and the pipe its output is read from (sup.ptmx). Unlike a
// Unix PTY master, the output pipe does not end when the command exits:
// it ends once the pseudoconsole is closed (ptyTreeGone). Not yet run on
// Windows.
type ptyState struct {
	con       windows.Handle // HPCON
	in        *os.File       // what the console reads as typed input
	closeOnce sync.Once
}

// openConsole creates a pseudoconsole con of cols×rows (consoleSize)
// with its two pipes: in is the input's write end, out the output's read
// end (sup.ptmx); the console's own ends, childEnds, are closed once the
// command has started.
func openConsole(cols, rows int) (con windows.Handle, in, out *os.File, childEnds []windows.Handle, err error) {
	var inR, inW, outR, outW windows.Handle
	if err := windows.CreatePipe(&inR, &inW, nil, 0); err != nil {
		return 0, nil, nil, nil, fmt.Errorf("pseudoconsole input pipe: %w", err)
	}
	if err := windows.CreatePipe(&outR, &outW, nil, 0); err != nil {
		windows.CloseHandle(inR)
		windows.CloseHandle(inW)
		return 0, nil, nil, nil, fmt.Errorf("pseudoconsole output pipe: %w", err)
	}
	x, y := consoleSize(cols, rows)
	if err := windows.CreatePseudoConsole(windows.Coord{X: x, Y: y}, inR, outW, 0, &con); err != nil {
		for _, h := range []windows.Handle{inR, inW, outR, outW} {
			windows.CloseHandle(h)
		}
		return 0, nil, nil, nil, fmt.Errorf("create pseudoconsole: %w", err)
	}
	return con, os.NewFile(uintptr(inW), "conpty-in"), os.NewFile(uintptr(outR), "conpty-out"), []windows.Handle{inR, outW}, nil
}

// close closes the pseudoconsole once: its processes get
// CTRL_CLOSE_EVENT (the Windows SIGHUP) and the output pipe ends after
// its last bytes. It may wait until the output is read: call it while
// the pump runs.
func (p *ptyState) close() {
	p.closeOnce.Do(func() {
		if p.con != 0 {
			windows.ClosePseudoConsole(p.con)
		}
		if p.in != nil {
			p.in.Close()
		}
	})
}

// ptyEOF is what closing a pseudoconsole session's stdin types: Ctrl+Z
// and Enter, the end of input to a console program reading a line (Ctrl+D
// means nothing to a Windows console).
const ptyEOF = "\x1a\r"

// setPTYSize resizes the pseudoconsole.
func (s *sup) setPTYSize(cols, rows int) error {
	x, y := consoleSize(cols, rows)
	return windows.ResizePseudoConsole(s.pty.con, windows.Coord{X: x, Y: y})
}

// ptyInput is where the command's terminal input goes: the
// pseudoconsole's input pipe.
func (s *sup) ptyInput() *os.File { return s.pty.in }

// ptyTreeGone closes the pseudoconsole once the session's processes are
// gone, so that its output pipe ends (see ptyState).
func (s *sup) ptyTreeGone() { s.pty.close() }
