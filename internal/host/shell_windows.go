package host

import (
	"os"
	"os/exec"

	"github.com/conchsh/conch/internal/host/winshell"
)

// ShellArgv is the argv that runs command in the host's shell on
// Windows: PowerShell 7, else Windows PowerShell 5.1, as winshell.Pick
// finds them in this process's environment, with the command passed as
// each expects (winshell.Shell.Argv). Not yet run on Windows.
func ShellArgv(command string) []string { return WindowsShell().Argv(command) }

// WindowsShell is the PowerShell commands run in here.
func WindowsShell() winshell.Shell {
	return winshell.Pick(winshell.System{
		Getenv: os.Getenv, // case-insensitive on Windows
		IsFile: func(p string) bool {
			fi, err := os.Stat(p)
			return err == nil && fi.Mode().IsRegular()
		},
		LookPath: exec.LookPath,
	})
}
