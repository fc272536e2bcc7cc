package entry

import (
	"os"

	"golang.org/x/sys/windows"
)

// osEntries are the entry points that exist on this OS only: none on
// Windows (no sandbox backend there needs an init of conch's inside).
var osEntries = map[string]func([]string) int{}

// reportReady writes line on the engine's ready pipe, which is the
// supervisor's standard output on Windows, when it is a pipe. Not yet
// run on Windows.
func reportReady(line []byte) {
	if t, err := windows.GetFileType(windows.Handle(os.Stdout.Fd())); err == nil && t == windows.FILE_TYPE_PIPE {
		os.Stdout.Write(line)
	}
}
