package sandbox

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestProgramRefsShellForms generates the ways a program-valued key can
// name a workspace file through the shell git runs it with — quoted,
// escaped, through $PWD or $HOME, inside a `sh -c` script, after an
// assignment — and the ways a plain alias can set such a key (-c,
// --config-env), for paths with and without blanks, and checks that the
// file is among what is protected and made when missing. The plain split
// of the old code missed every form with a blank, an escape or a
// variable, and every plain alias.
func TestProgramRefsShellForms(t *testing.T) {
	top := "/ws/repo"
	home := "/ws"
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "TOOLS=tools"}
	paths := []string{"tools/fsmon", "tools/my fsmon", "my dir/x y"}
	quote := func(p string) string { return "'" + p + "'" }
	dquote := func(p string) string { return `"` + p + `"` }
	esc := func(p string) string { return strings.ReplaceAll(strings.ReplaceAll(p, `\`, `\\`), " ", `\ `) }
	forms := map[string]func(p string) string{
		"quoted":        quote,
		"double-quoted": dquote,
		"escaped":       esc,
		"pwd":           func(p string) string { return "$PWD/" + esc(p) },
		"pwd-braces":    func(p string) string { return `"${PWD}/` + p + `"` },
		"home":          func(p string) string { return `"$HOME/repo/` + p + `"` },
		"var":           func(p string) string { return `"$PWD/${TOOLS}` + strings.TrimPrefix(p, "tools") + `"` },
		"assignment":    func(p string) string { return "LC_ALL=C " + quote(p) + " --flag" },
		"after-and":     func(p string) string { return "true && " + quote(p) },
		"env":           func(p string) string { return "env A=1 " + quote(p) },
		"exec":          func(p string) string { return "exec " + quote(p) },
		"nice":          func(p string) string { return "nice -n 5 " + dquote(p) + " x" },
		"sh-c":          func(p string) string { return "sh -c " + quote(esc(p)+" --x") },
		"sh-c-dquote":   func(p string) string { return "sh -c " + dquote(quote(p)+" arg") },
		"backslash-mid": func(p string) string { return strings.Replace(esc(p), "/", `\/`, 1) },
		"toplevel":      func(p string) string { return `"$(git rev-parse --show-toplevel)/` + p + `"` },
		"pwd-subst":     func(p string) string { return "$(pwd)/" + esc(p) },
		"backquote":     func(p string) string { return "\"`pwd`/" + p + "\"" },
	}
	for fname, f := range forms {
		for _, p := range paths {
			if fname == "var" && !strings.HasPrefix(p, "tools") {
				continue
			}
			want := filepath.Join(top, p)
			for _, key := range []string{"core.fsmonitor", "alias.x"} {
				v := f(p)
				if key == "alias.x" {
					v = "!" + v
				}
				if !madeRef(programRefs(key, v, top, home, env), want) {
					t.Errorf("%s %s = %s: %s not protected (refs %v)", fname, key, v, want, programRefs(key, v, top, home, env))
				}
			}
		}
	}
	// A plain alias (git arguments) setting a program or hooks key.
	aliasForms := map[string]func(p string) string{
		"-c":           func(p string) string { return "-c core.fsmonitor=" + esc(quote(p)) + " status" },
		"-c quoted":    func(p string) string { return `-c "core.fsmonitor='` + p + `'" status` },
		"-c hooksPath": func(p string) string { return "-c core.hooksPath=" + quote(filepath.Dir(p)) + " commit" },
		"--config-env": func(p string) string { return "--config-env=core.sshCommand=FSMON fetch" },
	}
	for fname, f := range aliasForms {
		for _, p := range paths {
			want := filepath.Join(top, p)
			if fname == "-c hooksPath" {
				want = filepath.Join(top, filepath.Dir(p))
			}
			e := append(env, "FSMON="+quote(p))
			if refs := keyRefs(gitConfigEntry{key: "alias.st", value: f(p)}, "", top, home, e); !madeRef(refs, want) {
				t.Errorf("alias %s (%s): %s not protected (refs %v)", fname, f(p), want, refs)
			}
		}
	}
	// Not a path: nothing made for an option's value or a word git
	// does not run.
	for _, v := range []string{"less -R", "true", "git -c x=y log"} {
		for _, r := range programRefs("core.pager", v, top, home, env) {
			if r.make && !strings.Contains(strings.TrimPrefix(r.path, top+"/"), "/") {
				t.Errorf("%s: makes %s", v, r.path)
			}
		}
	}
}

func madeRef(refs []gitRef, p string) bool {
	for _, r := range refs {
		if r.path == p && r.make {
			return true
		}
	}
	return false
}
