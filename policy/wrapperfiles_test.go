package policy

import (
	"slices"
	"strings"
	"testing"
)

// xargsFileOptions are the GNU xargs options that make xargs itself touch
// a file: --arg-file reads its arguments from FILE (`xargs -a
// /etc/shadow echo` prints it with only echo allowlisted), --interactive
// and --open-tty open /dev/tty.
var xargsFileOptions = []struct {
	short, long string
	value       bool
}{
	{"a", "arg-file", true},
	{"p", "interactive", false},
	{"o", "open-tty", false},
}

// TestXargsFileOptionsRefused generates every spelling of the xargs
// options that touch a file: short, attached or separate value, after
// clusters of accepted flags, long with "=" or a separate value, and each
// abbreviation getopt accepts; none is satisfied, with echo allowlisted.
func TestXargsFileOptionsRefused(t *testing.T) {
	values := []string{"x", "in", "/etc/passwd", "etc/passwd", "-", "''"}
	clusters := []string{"", "0", "r", "t", "x", "0rtx"}
	var cmds []string
	for _, o := range xargsFileOptions {
		for _, c := range clusters {
			if o.value {
				for _, v := range values {
					cmds = append(cmds, "xargs -"+c+o.short+" "+v+" echo", "xargs -"+c+o.short+v+" echo")
				}
			} else {
				cmds = append(cmds, "xargs -"+c+o.short+" echo")
			}
		}
		for n := 1; n <= len(o.long); n++ {
			name := "--" + o.long[:n]
			if o.value {
				for _, v := range values {
					cmds = append(cmds, "xargs "+name+"="+v+" echo", "xargs "+name+" "+v+" echo")
				}
			} else {
				cmds = append(cmds, "xargs "+name+" echo")
			}
		}
	}
	for _, cmd := range cmds {
		for _, c := range []string{cmd, "echo x | " + cmd, "nice " + cmd, "bash -c " + quote(cmd)} {
			req := stdRequest(c)
			req.Ask = AskOff
			if d := Evaluate(req); d.Outcome == OutcomeRun {
				t.Errorf("%q runs (pinned %s): xargs touches a file", c, d.Pinned)
			}
		}
	}
	// The forms that touch nothing still run.
	for _, c := range []string{"echo x | xargs -0rt echo", "xargs -n 1 -P 2 echo", "xargs --max-args=1 echo", "xargs -d , echo"} {
		if d := Evaluate(stdRequest(c)); d.Outcome != OutcomeRun {
			t.Errorf("%q: %s %s", c, d.Outcome, d.Reason)
		}
	}
}

// TestTerminalFileWrappers: nohup appends its command's output to
// ./nohup.out (else ~/nohup.out) when its output is a terminal. With a
// terminal (PTY mode) every accepted form of it, at any depth, is a miss
// unless nohup itself is allowlisted; without one it is transparent.
func TestTerminalFileWrappers(t *testing.T) {
	for _, w := range TerminalFileWrappers {
		var cmds []string
		for _, inner := range []string{"echo hi", "git status", "head -n 1", "nice " + w + " echo hi"} {
			c := w + " " + inner
			cmds = append(cmds, c, "env "+c, "nice -n 5 "+c, "timeout 5 "+c, "stdbuf -oL "+c, "echo x | "+c,
				"bash -c "+quote(c), "sh -ec "+quote("echo a && "+c), "echo x | xargs "+c)
		}
		for _, c := range cmds {
			req := stdRequest(c)
			req.Ask = AskOff
			plain := Evaluate(req)
			req.Terminal = true
			d := Evaluate(req)
			if d.Outcome == OutcomeRun {
				t.Errorf("%q runs with a terminal (pinned %s): %s writes %s.out", c, d.Pinned, w, w)
			}
			if strings.Contains(c, "xargs") {
				continue // xargs runs no wrapper
			}
			if plain.Outcome != OutcomeRun {
				t.Errorf("%q without a terminal: %s %s", c, plain.Outcome, plain.Reason)
			}
			req.Ask = AskOnMiss
			if d := Evaluate(req); !slices.Contains(d.Persist, "/usr/bin/"+w) {
				t.Errorf("%q with a terminal: allow-always would persist %q, without /usr/bin/%s", c, d.Persist, w)
			}
			req.Allowlist = append(req.Allowlist, AllowEntry{Pattern: "/usr/bin/" + w})
			if d := Evaluate(req); d.Outcome != OutcomeRun {
				t.Errorf("%q with a terminal and %s allowlisted: %s %s", c, w, d.Outcome, d.Reason)
			}
		}
		// Allowlisting the wrapper does not allow what it runs.
		req := stdRequest(w + " curl x")
		req.Terminal = true
		req.Allowlist = append(req.Allowlist, AllowEntry{Pattern: "/usr/bin/" + w})
		if d := Evaluate(req); d.Outcome == OutcomeRun {
			t.Errorf("%s curl x ran with %s allowlisted", w, w)
		}
	}
}

// TestJQModuleFiles: jq builtins that read module files from the library
// path are refused in the filter, like import and include.
func TestJQModuleFiles(t *testing.T) {
	for _, f := range []string{`"x"|modulemeta`, `"/etc/passwd" | modulemeta`, `MODULEMETA`, `import "a" as a; .`, `include "a"; .`} {
		if why := CheckProfile("jq", BuiltinProfiles["jq"], []string{f}); why == "" {
			t.Errorf("jq %q passes", f)
		}
	}
}

// TestZshParameterFlags: an unquoted "$" followed by a zsh parameter flag
// (`$~X`: the value of X becomes a pattern, and its e qualifier runs code)
// fails the analysis wherever it is: at the start, inside a word, after
// other text, in the inline script of any shell wrapper. Escaped and
// quoted forms, which no shell expands, stay literal words.
func TestZshParameterFlags(t *testing.T) {
	for _, f := range zshFlags {
		for _, w := range []string{"$" + string(f) + "X", "a$" + string(f) + "X", "$" + string(f) + "X/b", "x=$" + string(f) + "{X}", "$" + string(f)} {
			for _, cmd := range []string{"echo " + w, "echo a | echo b " + w, "zsh -f -c " + quote("echo "+w), "bash -c " + quote("echo "+w), "env echo " + w} {
				if a := Analyze(cmd); a.OK && !strings.Contains(cmd, "-c") {
					t.Errorf("%q: analysis ok", cmd)
				}
				req := stdRequest(cmd)
				req.Ask = AskOff
				if d := Evaluate(req); d.Outcome == OutcomeRun {
					t.Errorf("%q runs (pinned %s)", cmd, d.Pinned)
				}
			}
		}
		for _, cmd := range []string{`echo \$` + string(f) + "X", "echo '$" + string(f) + "X'", `echo "$` + string(f) + `X"`} {
			if d := Evaluate(stdRequest(cmd)); d.Outcome != OutcomeRun {
				t.Errorf("%q: %s %s", cmd, d.Outcome, d.Reason)
			}
		}
	}
}

// TestZshSubscript: zsh reads "$NAME[…]" (unquoted or in double quotes)
// as a subscript and evaluates it as arithmetic, which runs the command
// substitutions of a variable's value (X='HOME[$(cmd)]' from the request's
// environment). Bash reads it as $NAME and the text "[…]". Every such word
// fails the analysis; the spellings that mean the same to bash and nothing
// to zsh pass.
func TestZshSubscript(t *testing.T) {
	for _, w := range zshSubscriptWords() {
		for _, cmd := range []string{"echo " + w, "echo a | echo b " + w, "zsh -f -c " + quote("echo "+w), "bash -c " + quote("echo "+w), "env echo " + w} {
			if a := Analyze(cmd); a.OK && !strings.Contains(cmd, "-c") {
				t.Errorf("%q: analysis ok", cmd)
			}
			req := stdRequest(cmd)
			req.Ask = AskOff
			if d := Evaluate(req); d.Outcome == OutcomeRun {
				t.Errorf("%q runs (pinned %s)", cmd, d.Pinned)
			}
		}
	}
	for _, w := range []string{"${X}[Y]", `"${X}[Y]"`, `$X"[Y]"`, `\$X[Y]`, `'$X[Y]'`, `$X\[Y]`, `"$X\[Y]"`, "$X]", "$X/[a]"} {
		if d := Evaluate(stdRequest("echo " + w)); d.Outcome != OutcomeRun {
			t.Errorf("%q: %s %s", w, d.Outcome, d.Reason)
		}
	}
}

// zshSubscriptWords generates words with a $NAME directly followed by "[".
func zshSubscriptWords() []string {
	var out []string
	for _, name := range []string{"X", "HOME", "a_1"} {
		for _, sub := range []string{"[Y]", "[1]", "[$Y]", "[]", "[X]y", "[(r)x]"} {
			e := "$" + name + sub
			out = append(out, e, "a"+e, e+"/b", "x="+e, `"`+e+`"`, `"a `+e+` b"`, `a"`+e+`"b`, "~/"+e)
		}
	}
	return out
}
