package host

import (
	"path/filepath"
	"runtime"
	"strings"
)

// workdirUnder is the directory a request's workdir w names, relative
// ones under def (the workspace): joinWorkdir with this system's rules.
func workdirUnder(def, w string) string {
	if runtime.GOOS == "windows" {
		return joinWindowsWorkdir(def, w)
	}
	if filepath.IsAbs(w) {
		return w
	}
	return filepath.Join(def, w)
}

// joinWindowsWorkdir resolves the workdir w against def with Windows
// path rules, whatever system it runs on: "C:\x" and `\\srv\share\x` as
// they are (either separator); a rooted `\x` on def's drive; a
// drive-relative "D:x" under def when def is on D:, else under D:'s root
// (a service has no current directory per drive); anything else under
// def. The result is not cleaned.
func joinWindowsWorkdir(def, w string) string {
	isSep := func(c byte) bool { return c == '\\' || c == '/' }
	drive := func(p string) string {
		if len(p) >= 2 && p[1] == ':' && 'a' <= p[0]|0x20 && p[0]|0x20 <= 'z' {
			return p[:2]
		}
		return ""
	}
	switch d := drive(w); {
	case len(w) >= 2 && isSep(w[0]) && isSep(w[1]): // a share
		return w
	case d != "" && len(w) > 2 && isSep(w[2]): // C:\x
		return w
	case d != "": // C:x, C:
		if strings.EqualFold(d, drive(def)) {
			return strings.TrimRight(def, `\/`) + `\` + w[2:]
		}
		return d + `\` + w[2:]
	case w != "" && isSep(w[0]): // \x
		return drive(def) + w
	}
	return strings.TrimRight(def, `\/`) + `\` + w
}
