// Package winshell picks the shell of host commands on Windows and builds
// its command line: PowerShell 7 (pwsh.exe) from %ProgramFiles%,
// %ProgramW6432% or PATH, else Windows PowerShell 5.1 (powershell.exe).
// It is pure: the environment and the file system are given to it, so its
// rules are tested on every OS. internal/host's ShellArgv calls it on
// Windows.
package winshell

import (
	"encoding/base64"
	"strings"
	"unicode/utf16"
)

// Kind is the PowerShell a Shell is.
type Kind string

const (
	// Pwsh is PowerShell 7 or later (pwsh.exe).
	Pwsh Kind = "pwsh"
	// WindowsPowerShell is Windows PowerShell 5.1 (powershell.exe), which
	// every Windows 10 and 11 has.
	WindowsPowerShell Kind = "powershell"
)

// System is what Pick reads. Getenv must look keys up without regard to
// case, as Windows does (os.Getenv on Windows does).
type System struct {
	Getenv func(key string) string
	// IsFile reports whether path names an existing regular file.
	IsFile func(path string) bool
	// LookPath finds an executable on PATH (exec.LookPath).
	LookPath func(file string) (string, error)
}

// Shell is a picked shell: its executable and what it is.
type Shell struct {
	Path string
	Kind Kind
}

// Pick returns PowerShell 7 from, in order, %ProgramFiles%\PowerShell\7,
// %ProgramW6432%\PowerShell\7 (the 64-bit Program Files, which a 32-bit
// process sees under that name) and PATH; else Windows PowerShell 5.1
// from %SystemRoot%\System32\WindowsPowerShell\v1.0, else from PATH, else
// by its usual path (a start then fails as "not found").
func Pick(sys System) Shell {
	for _, env := range []string{"ProgramFiles", "ProgramW6432"} {
		if dir := sys.Getenv(env); dir != "" {
			if p := join(dir, `PowerShell\7\pwsh.exe`); sys.IsFile(p) {
				return Shell{Path: p, Kind: Pwsh}
			}
		}
	}
	if p, err := sys.LookPath("pwsh.exe"); err == nil && p != "" {
		return Shell{Path: p, Kind: Pwsh}
	}
	root := sys.Getenv("SystemRoot")
	if root != "" {
		if p := join(root, `System32\WindowsPowerShell\v1.0\powershell.exe`); sys.IsFile(p) {
			return Shell{Path: p, Kind: WindowsPowerShell}
		}
	}
	if p, err := sys.LookPath("powershell.exe"); err == nil && p != "" {
		return Shell{Path: p, Kind: WindowsPowerShell}
	}
	if root == "" {
		root = `C:\Windows`
	}
	return Shell{Path: join(root, `System32\WindowsPowerShell\v1.0\powershell.exe`), Kind: WindowsPowerShell}
}

// join joins a Windows directory and a relative path with one `\`,
// whatever OS this runs on.
func join(dir, rel string) string {
	return strings.TrimRight(dir, `\/`) + `\` + rel
}

// Argv is the argument vector that runs command: without the user's
// profile, without prompts, without the logo. PowerShell 7 takes the
// command as the argument of -Command (it reads its command line by the
// usual Windows rules, which os/exec's quoting follows). Windows
// PowerShell 5.1 gets it as -EncodedCommand, base64 of its UTF-16LE text:
// 5.1 re-parses what follows -Command and drops double quotes inside it,
// and the encoded form passes every character through untouched. Not yet
// run on Windows.
func (s Shell) Argv(command string) []string {
	argv := []string{s.Path, "-NoLogo", "-NoProfile", "-NonInteractive"}
	if s.Kind == Pwsh {
		return append(argv, "-Command", command)
	}
	return append(argv, "-EncodedCommand", Encode(command))
}

// Encode is PowerShell's -EncodedCommand form of command: base64 of its
// UTF-16LE code units.
func Encode(command string) string {
	units := utf16.Encode([]rune(command))
	b := make([]byte, 2*len(units))
	for i, u := range units {
		b[2*i], b[2*i+1] = byte(u), byte(u>>8)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// FoldEnv returns a Getenv over environ ("KEY=value" entries) that
// ignores the case of keys, as Windows does; the first entry of a key
// wins, as in the Windows environment block.
func FoldEnv(environ []string) func(string) string {
	m := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if _, dup := m[strings.ToUpper(k)]; !dup {
			m[strings.ToUpper(k)] = v
		}
	}
	return func(key string) string { return m[strings.ToUpper(key)] }
}
