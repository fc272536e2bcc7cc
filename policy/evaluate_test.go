package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestMinMax(t *testing.T) {
	sec := []Security{SecurityDeny, SecurityAllowlist, SecurityFull}
	for i, a := range sec {
		for j, b := range sec {
			want := sec[min(i, j)]
			if got := Min(a, b); got != want {
				t.Errorf("Min(%s,%s) = %s", a, b, got)
			}
		}
	}
	if Min("bogus", SecurityFull) != SecurityDeny || Min(SecurityFull, "") != SecurityDeny {
		t.Error("invalid security must fail closed")
	}
	ask := []Ask{AskOff, AskOnMiss, AskAlways}
	for i, a := range ask {
		for j, b := range ask {
			want := ask[max(i, j)]
			if got := Max(a, b); got != want {
				t.Errorf("Max(%s,%s) = %s", a, b, got)
			}
		}
	}
	if Max("bogus", AskOff) != AskAlways {
		t.Error("invalid ask must fail closed")
	}
}

// TestMatrix is the whole security × ask × analysis table.
func TestMatrix(t *testing.T) {
	cmds := map[string]string{
		"satisfied":  "git status | head -n 5",
		"miss":       "curl -s https://example.com",
		"failed":     "git status > out",
		"heredoc":    "git apply <<EOF\nx\nEOF",
		"blocked":    "sudo git status",
		"builtin":    "cd /tmp",
		"unresolved": "nosuchtool",
	}
	type want struct{ outcome, reason string }
	deny := want{OutcomeDeny, "exec denied: host=gateway security=deny"}
	always := want{OutcomePrompt, "ask=always"}
	run := want{OutcomeRun, ""}
	miss := want{OutcomeDeny, "exec denied: allowlist miss"}
	tests := []struct {
		sec  Security
		ask  Ask
		kind string
		want want
	}{}
	for kind := range cmds {
		for _, ask := range []Ask{AskOff, AskOnMiss, AskAlways} {
			tests = append(tests, struct {
				sec  Security
				ask  Ask
				kind string
				want want
			}{SecurityDeny, ask, kind, deny})
			w := run
			if ask == AskAlways {
				w = always
			}
			tests = append(tests, struct {
				sec  Security
				ask  Ask
				kind string
				want want
			}{SecurityFull, ask, kind, w})
			switch {
			case ask == AskAlways:
				w = always
			case kind == "satisfied":
				w = run
			case ask == AskOff:
				w = miss
			default:
				w = want{OutcomePrompt, ""} // reason checked below
			}
			tests = append(tests, struct {
				sec  Security
				ask  Ask
				kind string
				want want
			}{SecurityAllowlist, ask, kind, w})
		}
	}
	promptReasons := map[string]string{
		"miss":       "allowlist miss: /usr/bin/curl",
		"failed":     "analysis failed: unsupported shell construct: redirection (>)",
		"heredoc":    "heredoc requires approval",
		"blocked":    "allowlist miss: /usr/bin/sudo (blocked wrapper sudo)",
		"builtin":    "allowlist miss: cd (shell builtin cd)",
		"unresolved": "allowlist miss: nosuchtool (unresolved nosuchtool (not found in PATH))",
	}
	for _, tt := range tests {
		req := stdRequest(cmds[tt.kind])
		req.Security, req.Ask = tt.sec, tt.ask
		d := Evaluate(req)
		reason := tt.want.reason
		if tt.want.outcome == OutcomePrompt && reason == "" {
			reason = promptReasons[tt.kind]
		}
		if d.Outcome != tt.want.outcome || d.Reason != reason {
			t.Errorf("%s/%s/%s: %s %q, want %s %q", tt.sec, tt.ask, tt.kind, d.Outcome, d.Reason, tt.want.outcome, reason)
		}
		if (d.Pinned != "") != (tt.sec == SecurityAllowlist && d.Outcome == OutcomeRun) {
			t.Errorf("%s/%s/%s: pinned %q", tt.sec, tt.ask, tt.kind, d.Pinned)
		}
		hw := slices.Contains(d.Warnings, HeredocWarning)
		if hw != (tt.kind == "heredoc" && tt.sec == SecurityAllowlist) {
			t.Errorf("%s/%s/%s: warnings %q", tt.sec, tt.ask, tt.kind, d.Warnings)
		}
	}
}

func TestEffectiveDefaults(t *testing.T) {
	req := stdRequest("curl x")
	req.Security, req.Ask = "", ""
	if d := Evaluate(req); d.Security != SecurityAllowlist || d.Ask != AskOnMiss || d.Outcome != OutcomePrompt {
		t.Errorf("zero security/ask: %+v", d)
	}
	req.Security = "FULL"
	if d := Evaluate(req); d.Outcome != OutcomeDeny {
		t.Errorf("unknown security must deny: %+v", d)
	}
	req.Security, req.Ask = SecurityFull, "never"
	if d := Evaluate(req); d.Outcome != OutcomePrompt || d.Ask != AskAlways {
		t.Errorf("unknown ask must prompt: %+v", d)
	}
	req.Security, req.Ask, req.Host = SecurityDeny, AskOff, "node"
	if d := Evaluate(req); d.Reason != "exec denied: host=node security=deny" {
		t.Errorf("deny text: %q", d.Reason)
	}
}

func verdicts(d Decision) []string {
	var out []string
	for _, p := range d.Analysis.Parts {
		for _, s := range p.Segments {
			out = append(out, s.Verdict)
		}
	}
	return out
}

// TestWrappers covers the dispatch wrappers: accepted forms are unwrapped, others blocked.
func TestWrappers(t *testing.T) {
	tests := []struct {
		cmd      string
		verdict  string
		exe      string
		wrappers []string
	}{
		{"env git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/env"}},
		{"env -- git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/env"}},
		{"env curl x", VerdictMiss, "/usr/bin/curl", []string{"/usr/bin/env"}},
		{"env head -n 1", VerdictSafeBins, "/usr/bin/head", []string{"/usr/bin/env"}},
		{"env", VerdictBlocked, "/usr/bin/env", nil},
		{"env --", VerdictBlocked, "/usr/bin/env", nil},
		{"env -i git status", VerdictBlocked, "/usr/bin/env", nil},
		{"env -u HOME git status", VerdictBlocked, "/usr/bin/env", nil},
		{"env -C /tmp git status", VerdictBlocked, "/usr/bin/env", nil},
		{"env -S 'git status'", VerdictBlocked, "/usr/bin/env", nil},
		{"env -0", VerdictBlocked, "/usr/bin/env", nil},
		{"env FOO=1 git status", VerdictBlocked, "/usr/bin/env", nil},
		{"env PATH=/tmp git status", VerdictBlocked, "/usr/bin/env", nil},
		{"env $X git", VerdictBlocked, "/usr/bin/env", nil},
		{"env gi* status", VerdictBlocked, "/usr/bin/env", nil},
		{"env -- -i git", VerdictMiss, "", []string{"/usr/bin/env"}},
		{"nice git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/nice"}},
		{"nice -5 git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/nice"}},
		{"nice -n 5 git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/nice"}},
		{"nice -n -5 git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/nice"}},
		{"nice --adjustment=5 git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/nice"}},
		{"nice --adjustment 5 git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/nice"}},
		{"nice -n x git status", VerdictBlocked, "/usr/bin/nice", nil},
		{"nice --help", VerdictBlocked, "/usr/bin/nice", nil},
		{"nice -n", VerdictBlocked, "/usr/bin/nice", nil},
		{"nice -n 5", VerdictBlocked, "/usr/bin/nice", nil},
		{"nohup git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/nohup"}},
		{"nohup --version", VerdictBlocked, "/usr/bin/nohup", nil},
		{"nohup", VerdictBlocked, "/usr/bin/nohup", nil},
		{"stdbuf -oL git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/stdbuf"}},
		{"stdbuf -o L -e 0 git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/stdbuf"}},
		{"stdbuf --output=L --input=4K git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/stdbuf"}},
		{"stdbuf git status", VerdictBlocked, "/usr/bin/stdbuf", nil},
		{"stdbuf -oX git status", VerdictBlocked, "/usr/bin/stdbuf", nil},
		{"stdbuf --output L git status", VerdictBlocked, "/usr/bin/stdbuf", nil},
		{"timeout 5 git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/timeout"}},
		{"timeout 1.5s git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/timeout"}},
		{"timeout -s KILL -k 2 --preserve-status --foreground -v 5m git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/timeout"}},
		{"timeout --signal=TERM --kill-after=1 5 git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/timeout"}},
		{"timeout git status", VerdictBlocked, "/usr/bin/timeout", nil},
		{"timeout 5", VerdictBlocked, "/usr/bin/timeout", nil},
		{"timeout -sKILL 5 git status", VerdictBlocked, "/usr/bin/timeout", nil},
		{"timeout --verbose 5 git", VerdictBlocked, "/usr/bin/timeout", nil},
		{"timeout $T git status", VerdictBlocked, "/usr/bin/timeout", nil},
		{"env nice nohup timeout 5 git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/env", "/usr/bin/nice", "/usr/bin/nohup", "/usr/bin/timeout"}},
		{"env env env env env git status", VerdictBlocked, "/usr/bin/env", []string{"/usr/bin/env", "/usr/bin/env", "/usr/bin/env", "/usr/bin/env"}},
		{"/usr/bin/env git status", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/env"}},
		{"env sudo git", VerdictBlocked, "/usr/bin/sudo", []string{"/usr/bin/env"}},
		{"nice env -i git", VerdictBlocked, "/usr/bin/env", []string{"/usr/bin/nice"}},
		{"env cd /", VerdictBlocked, "", []string{"/usr/bin/env"}},
		// xargs: the command must be allowlisted
		{"xargs git log", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/xargs"}},
		{"xargs -0 -n 1 git log", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/xargs"}},
		{"xargs -0rn1 git log", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/xargs"}},
		{"xargs -I{} git show {}", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/xargs"}},
		{"xargs --max-args=1 -- git show", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/xargs"}},
		{"xargs head", VerdictMiss, "/usr/bin/head", []string{"/usr/bin/xargs"}},
		{"xargs rm", VerdictMiss, "/usr/bin/rm", []string{"/usr/bin/xargs"}},
		{"xargs", VerdictBlocked, "/usr/bin/xargs", nil},
		{"xargs -Igit git -rf /", VerdictBlocked, "/usr/bin/xargs", nil},
		{"xargs -I it git x", VerdictBlocked, "/usr/bin/xargs", nil},
		{"xargs --replace=git git x", VerdictBlocked, "/usr/bin/xargs", nil},
		{"xargs --replace= git x", VerdictBlocked, "/usr/bin/xargs", nil},
		{"xargs -0I git git x", VerdictBlocked, "/usr/bin/xargs", nil},
		{"xargs --rep=git git x", VerdictBlocked, "/usr/bin/xargs", nil},
		{"xargs -I {} git show {}", VerdictAllowlist, "/usr/bin/git", []string{"/usr/bin/xargs"}},
		{"xargs -i git", VerdictBlocked, "/usr/bin/xargs", nil},
		{"xargs --process-slot-var=X git", VerdictBlocked, "/usr/bin/xargs", nil},
		{"xargs sh -c 'git status'", VerdictMiss, "/usr/bin/sh", []string{"/usr/bin/xargs"}},
		{"xargs env git", VerdictMiss, "/usr/bin/env", []string{"/usr/bin/xargs"}},
		// always blocked, by any name
		{"sudo git status", VerdictBlocked, "/usr/bin/sudo", nil},
		{"doas git", VerdictBlocked, "/usr/bin/doas", nil},
		{"chrt 1 git", VerdictBlocked, "/usr/bin/chrt", nil},
		{"ionice git", VerdictBlocked, "/usr/bin/ionice", nil},
		{"setsid git", VerdictBlocked, "/usr/bin/setsid", nil},
		{"taskset 1 git", VerdictBlocked, "/usr/bin/taskset", nil},
		{"su -c 'git status'", VerdictBlocked, "/usr/bin/su", nil},
		{"pkexec git", VerdictBlocked, "/usr/bin/pkexec", nil},
		{"runuser -u x git", VerdictBlocked, "/usr/bin/runuser", nil},
		{"chroot / git", VerdictBlocked, "/usr/bin/chroot", nil},
		{"nsenter -t 1 git", VerdictBlocked, "/usr/bin/nsenter", nil},
		{"unshare -r git", VerdictBlocked, "/usr/bin/unshare", nil},
		{"/bin/sudo git", VerdictBlocked, "/bin/sudo", nil},
		{"busybox chroot / sh", VerdictBlocked, "/usr/bin/busybox", nil},
	}
	for _, tt := range tests {
		req := stdRequest(tt.cmd)
		req.Allowlist = append(req.Allowlist, AllowEntry{Pattern: "/usr/bin/sudo"}, AllowEntry{Pattern: "/usr/bin/env"}, AllowEntry{Pattern: "/usr/bin/busybox"})
		d := Evaluate(req)
		if !d.Analysis.OK {
			t.Errorf("%q: analysis failed: %s", tt.cmd, d.Analysis.Reason)
			continue
		}
		s := d.Analysis.Parts[0].Segments[0]
		if s.Verdict != tt.verdict || s.Exe != tt.exe || !slices.Equal(s.Wrappers, tt.wrappers) {
			t.Errorf("%q: %s %q %q (%s), want %s %q %q", tt.cmd, s.Verdict, s.Exe, s.Wrappers, s.Rule, tt.verdict, tt.exe, tt.wrappers)
		}
		if (d.Outcome == OutcomeRun) != satisfied(tt.verdict) {
			t.Errorf("%q: outcome %s", tt.cmd, d.Outcome)
		}
	}
}

// TestWrapperOutsideTrustedDirs: a wrapper that is not in a trusted dir is
// only transparent when it is allowlisted itself.
func TestWrapperOutsideTrustedDirs(t *testing.T) {
	f := stdFS()
	f.exe("/home/u/bin/env", "/home/u/bin/bash")
	req := stdRequest("/home/u/bin/env git status")
	req.Env = f.env(stdPATH, "/home/u", "/home/u")
	if d := Evaluate(req); d.Outcome == OutcomeRun {
		t.Errorf("untrusted env unwrapped: %+v", d.Analysis.Parts[0].Segments[0])
	} else if !slices.Contains(d.Persist, "/home/u/bin/env") {
		t.Errorf("persist %q", d.Persist)
	}
	req.Command = "/home/u/bin/bash -c 'git status'"
	if d := Evaluate(req); d.Outcome == OutcomeRun {
		t.Errorf("untrusted bash unwrapped: %+v", d.Analysis.Parts[0].Segments[0])
	}
	// an allowlist that trusts ~/bin/* trusts the wrapper, not what it runs
	req.Allowlist = append(req.Allowlist, AllowEntry{Pattern: "~/bin/*"})
	if d := Evaluate(req); d.Outcome != OutcomeRun {
		t.Errorf("allowlisted bash -c git: %s %s", d.Outcome, d.Reason)
	}
	req.Command = "/home/u/bin/bash -c 'curl x'"
	if d := Evaluate(req); d.Outcome == OutcomeRun {
		t.Error("allowlisted bash ran an unallowlisted curl")
	}
	req.Command = "/home/u/bin/env curl x"
	if d := Evaluate(req); d.Outcome == OutcomeRun {
		t.Error("allowlisted env ran an unallowlisted curl")
	}
}

// TestShellWrappers covers sh -c and its kin, login shells and script operands.
func TestShellWrappers(t *testing.T) {
	tests := []struct {
		cmd  string
		pass bool
	}{
		{"bash -c 'git status'", true},
		{"sh -c 'git status | head -n 5'", true},
		// a login shell runs profile files the gate never judged
		{"bash -lc 'git status && echo done'", false},
		{"bash -lc 'echo hi'", false},
		{"bash -cl 'git status'", false},
		{"bash -xlc 'git status'", false},
		{"sh -l -c 'git status'", false},
		{"zsh --login -c 'git status'", false},
		{"bash -c 'bash -lc \"git status\"'", false},
		{"bash -ec 'git status; git log'", true},
		{"bash -l -e -u -x -c 'git status'", false},
		{"bash -e -u -x -c 'git status'", true},
		{"bash -c -e 'git status'", true},
		{"bash --login --noprofile --norc -o pipefail -c 'git status'", false},
		{"bash --noprofile --norc -o pipefail -c 'git status'", true},
		// zsh runs ~/.zshenv for every -c unless -f (NO_RCS)
		{"zsh -c 'git status'", false},
		{"zsh -e -c 'git status'", false},
		{"zsh -f -c 'git status'", true},
		{"zsh -fc 'git status'", true},
		{"zsh -c -f 'git status'", true},
		{"bash -f -c 'git status'", false},
		{"dash -c 'git status'", true},
		{"ksh -c 'git status'", true},
		{"mksh -c 'git status'", true},
		{"/bin/sh -c 'git status'", true},
		{"busybox sh -c 'git status'", true},
		{"busybox ash -c 'git status'", true},
		{"bash -c \"git status\"", true},
		{"bash -c 'bash -c \"git status\"'", true},
		{"bash -c 'env git status'", true},
		{"bash -c 'head -n 5'", true},
		{"bash -c 'curl x'", false},
		{"bash -c 'git status; curl x'", false},
		{"bash -c 'git status > x'", false},
		{"bash -c 'git $(id)'", false},
		{"bash -c 'git status' extra", false},
		{"bash -c 'git status' bash", false},
		{"bash -c", false},
		{"bash -cc 'git status'", false},
		{"bash -c \"git $X\"", false},
		{"bash -c \"$CMD\"", false},
		{"bash", false},
		{"bash -s", false},
		{"bash -i", false},
		{"bash -", false},
		{"bash --", false},
		{"bash -o posix -c 'git status'", false},
		{"bash +x -c 'git status'", false},
		{"bash -r -c 'git status'", false},
		{"bash --rcfile x -c 'git'", false},
		{"bash -c 'cat <<EOF\nx\nEOF'", false},
		{"bash -c 'sudo git'", false},
		{"bash -c 'bash -c \"bash -c \\\"bash -c git\\\"\"'", true}, // depth 4
		{"bash -c 'bash -c \"bash -c \\\"bash -c \\\\\\\"bash -c git\\\\\\\"\\\"\"'", false}, // depth 5
		{"busybox sh", false},
		{"busybox sh -s", false},
		{"sh -c 'cd /tmp'", false},
		{"sh -c 'eval git'", false},
		{"sh -c 'exec git'", false},
		{"zsh -c 'echo *(e:rm:)'", false},
		{"zsh -c '=rm -rf /'", false},
		{"bash scripts/missing.sh", false},
	}
	for _, tt := range tests {
		req := stdRequest(tt.cmd)
		d := Evaluate(req)
		if got := d.Outcome == OutcomeRun; got != tt.pass {
			var rule string
			if d.Analysis.OK {
				rule = d.Analysis.Parts[0].Segments[0].Rule
			}
			t.Errorf("%q: outcome %s (%s; %s), want run=%v", tt.cmd, d.Outcome, d.Reason, rule, tt.pass)
		}
	}
}

func TestShellScript(t *testing.T) {
	f := stdFS()
	f.symlink("/home/u/proj/link.sh", "/home/u/scripts/build.sh")
	env := f.env(stdPATH, "/home/u/proj", "/home/u")
	eval := func(cmd string, allow ...string) Decision {
		req := stdRequest(cmd)
		req.Env = env
		for _, a := range allow {
			req.Allowlist = append(req.Allowlist, AllowEntry{Pattern: a})
		}
		return Evaluate(req)
	}
	if d := eval("bash ../scripts/build.sh arg"); d.Outcome != OutcomePrompt || !slices.Equal(d.Persist, []string{"/home/u/scripts/build.sh"}) {
		t.Errorf("unlisted script: %s %q", d.Outcome, d.Persist)
	}
	if d := eval("bash ../scripts/build.sh arg", "~/scripts/*.sh"); d.Outcome != OutcomeRun {
		t.Errorf("listed script: %s %s", d.Outcome, d.Reason)
	} else if d.Pinned != "'/usr/bin/bash' '/home/u/scripts/build.sh' arg" {
		t.Errorf("pinned %q", d.Pinned)
	}
	// the realpath of the script is what must match
	if d := eval("sh link.sh", "/home/u/scripts/build.sh"); d.Outcome != OutcomeRun {
		t.Errorf("script via symlink: %s %s", d.Outcome, d.Reason)
	}
	if d := eval("sh link.sh", "/home/u/proj/*.sh"); d.Outcome == OutcomeRun {
		t.Error("a glob matched the symlink's name instead of the script's realpath")
	}
	// a literal pattern matches by realpath
	if d := eval("sh link.sh", "/home/u/proj/link.sh"); d.Outcome != OutcomeRun {
		t.Errorf("literal pattern by realpath: %s %s", d.Outcome, d.Reason)
	}
	// or the shell itself
	if d := eval("bash ../scripts/build.sh", "/usr/bin/bash"); d.Outcome != OutcomeRun {
		t.Errorf("allowlisted shell: %s %s", d.Outcome, d.Reason)
	}
	// an allowlisted shell does not make -c or other forms pass
	if d := eval("bash -c 'curl x'", "/usr/bin/bash"); d.Outcome == OutcomeRun {
		t.Error("allowlisted bash -c curl ran")
	}
	if d := eval("bash -i", "/usr/bin/bash"); d.Outcome == OutcomeRun || len(d.Persist) != 0 {
		t.Errorf("allowlisted bash -i: %s %q", d.Outcome, d.Persist)
	}
	if d := eval("bash ~/scripts/build.sh", "~/scripts/build.sh"); d.Outcome != OutcomeRun {
		t.Errorf("tilde script: %s %s", d.Outcome, d.Reason)
	}
	if d := eval("bash $S", "*"); d.Outcome == OutcomeRun {
		t.Error("non-literal script ran")
	}
}

func TestBuiltins(t *testing.T) {
	f := stdFS()
	for _, b := range Builtins {
		if b != "." {
			f.exe("/usr/bin/" + b)
		}
	}
	for _, b := range Builtins {
		req := stdRequest(b + " x")
		req.Env = f.env(stdPATH, "/home/u/proj", "/home/u")
		req.Allowlist = []AllowEntry{{Pattern: "*"}}
		d := Evaluate(req)
		if d.Outcome == OutcomeRun {
			t.Errorf("builtin %q ran", b)
			continue
		}
		if !d.Analysis.OK {
			continue // declare, local, … are declarations: analysis fails
		}
		s := d.Analysis.Parts[0].Segments[0]
		if s.Verdict != VerdictBlocked || len(d.Persist) != 0 {
			t.Errorf("builtin %q: %+v persist %q", b, s, d.Persist)
		}
	}
	// with a slash, the file runs, not the builtin
	req := stdRequest("/usr/bin/cd x")
	req.Allowlist = []AllowEntry{{Pattern: "*"}}
	if d := Evaluate(req); d.Outcome != OutcomeRun {
		t.Errorf("/usr/bin/cd: %s %s", d.Outcome, d.Reason)
	}
}

func TestStrictInlineEval(t *testing.T) {
	tests := []struct {
		cmd    string
		inline bool
	}{
		{"python3 -c 'print(1)'", true},
		{"python -c 'print(1)'", true},
		{"python3.11 -Bc 'print(1)'", true},
		{"python3 -I -c 'print(1)'", true},
		{"python3 script.py", false},
		{"python3 -m pytest", false},
		{"python3 -", true},
		{"python3", true},
		{"python3 --version", false},
		{"python3 $SCRIPT", true},
		{"node -e 'x'", true},
		{"node --eval 'x'", true},
		{"node --eval='x'", true},
		{"node -p 1", true},
		{"node --print 1", true},
		{"node -pe 1", true},
		{"node app.js", false},
		{"deno eval 'x'", true},
		{"deno run app.ts", false},
		{"bun -e 'x'", true},
		{"bun --eval 'x'", true},
		{"bun run x", false},
		{"ruby -e 'x'", true},
		{"ruby -ne 'x'", true},
		{"ruby x.rb", false},
		{"perl -e 'x'", true},
		{"perl -E 'x'", true},
		{"perl -lne 'x'", true},
		{"perl -i.bak -pe 's/a/b/' f", true},
		{"perl x.pl", false},
		{"php -r 'x'", true},
		{"php x.php", false},
		{"lua -e 'x'", true},
		{"lua5.4 -e 'x'", true},
		{"lua x.lua", false},
		{"env python3 -c 'x'", true},
		{"timeout 5 python3 -c 'x'", true},
		{"bash -c \"python3 -c 'x'\"", true},
		{"xargs python3", true},
	}
	for _, tt := range tests {
		for _, strict := range []bool{false, true} {
			req := stdRequest(tt.cmd)
			req.Allowlist = []AllowEntry{{Pattern: "/usr/bin/*"}}
			req.StrictInlineEval = strict
			d := Evaluate(req)
			want := OutcomeRun
			if strict && tt.inline {
				want = OutcomePrompt
			}
			if d.Outcome != want {
				t.Errorf("%q strict=%v: %s (%s), want %s", tt.cmd, strict, d.Outcome, d.Reason, want)
			}
			if strict && tt.inline && len(d.Persist) != 0 {
				t.Errorf("%q: strict inline eval persists %q", tt.cmd, d.Persist)
			}
		}
	}
	// ask=off denies
	req := stdRequest("python3 -c 'x'")
	req.Allowlist = []AllowEntry{{Pattern: "/usr/bin/*"}}
	req.StrictInlineEval, req.Ask = true, AskOff
	if d := Evaluate(req); d.Outcome != OutcomeDeny || d.Reason != "exec denied: allowlist miss" {
		t.Errorf("strict ask=off: %s %q", d.Outcome, d.Reason)
	}
	// security=full runs anyway
	req.Security = SecurityFull
	if d := Evaluate(req); d.Outcome != OutcomeRun {
		t.Errorf("strict full: %s", d.Outcome)
	}
}

// TestPersist covers what allow-always persists.
func TestPersist(t *testing.T) {
	tests := []struct {
		cmd  string
		want []string
	}{
		{"curl x", []string{"/usr/bin/curl"}},
		{"curl x | head -n 5", []string{"/usr/bin/curl"}},
		{"curl a; curl b && wget c", []string{"/usr/bin/curl", "/usr/bin/wget"}},
		{"env curl x", []string{"/usr/bin/curl"}},
		{"nice -n 5 nohup timeout 5 stdbuf -oL curl x", []string{"/usr/bin/curl"}},
		{"bash -c 'curl x | wget y'", []string{"/usr/bin/curl", "/usr/bin/wget"}},
		{"busybox sh -c 'curl x'", []string{"/usr/bin/curl"}},
		{"busybox wget x", nil},
		{"busybox", nil},
		{"sudo curl x", nil},
		{"cd /tmp", nil},
		{"nosuchtool", nil},
		{"git status > x", nil},
		{"bash -i", nil},
		{"env -i curl", nil},
		{"git apply <<EOF\nx\nEOF", nil},
		{"head /etc/passwd", []string{"/usr/bin/head"}},
	}
	for _, tt := range tests {
		d := Evaluate(stdRequest(tt.cmd))
		if d.Outcome == OutcomeRun {
			t.Errorf("%q ran", tt.cmd)
		}
		if !slices.Equal(d.Persist, tt.want) {
			t.Errorf("%q: persist %q, want %q", tt.cmd, d.Persist, tt.want)
		}
	}
	// only in allowlist mode
	req := stdRequest("curl x")
	req.Security, req.Ask = SecurityFull, AskAlways
	if d := Evaluate(req); len(d.Persist) != 0 {
		t.Errorf("full: persist %q", d.Persist)
	}
}

// TestPinned covers the pinned (literal argv) form of auto-allowed commands.
func TestPinned(t *testing.T) {
	tests := []struct{ cmd, want string }{
		{"git status", "'/usr/bin/git' status"},
		{"git log -- *.go $HOME", "'/usr/bin/git' log -- *.go $HOME"},
		{"git status | head -n 5 | wc -l", "'/usr/bin/git' status | '/usr/bin/head' '-n' '5' | '/usr/bin/wc' '-l'"},
		{"git status && echo ok || echo 'not ok'; git log", "'/usr/bin/git' status && '/usr/bin/echo' ok || '/usr/bin/echo' 'not ok'; '/usr/bin/git' log"},
		{"env git status", "'/usr/bin/git' status"},
		{"env -- git status", "'/usr/bin/git' status"},
		{"nice -n 5 git status", "'/usr/bin/nice' '-n' '5' '/usr/bin/git' status"},
		{"timeout 5 env git status", "'/usr/bin/timeout' '5' '/usr/bin/git' status"},
		{"/bin/git status", "'/usr/bin/git' status"}, // by realpath: the pattern's path runs
		{"'git' status # comment", "'/usr/bin/git' status"},
		{"tr \"it's\" x", `'/usr/bin/tr' 'it'\''s' 'x'`},
		{"bash -c 'git status | head -n 1'", `'/usr/bin/bash' '-c' ''\''/usr/bin/git'\'' status | '\''/usr/bin/head'\'' '\''-n'\'' '\''1'\'''`},
		{"xargs -0 git show", "'/usr/bin/xargs' '-0' '/usr/bin/git' show"},
	}
	for _, tt := range tests {
		d := Evaluate(stdRequest(tt.cmd))
		if d.Outcome != OutcomeRun {
			t.Errorf("%q: %s %s", tt.cmd, d.Outcome, d.Reason)
			continue
		}
		if d.Pinned != tt.want {
			t.Errorf("%q: pinned %s, want %s", tt.cmd, d.Pinned, tt.want)
		}
		if a := Analyze(d.Pinned); !a.OK {
			t.Errorf("%q: pinned %q does not re-analyse: %s", tt.cmd, d.Pinned, a.Reason)
		}
		// The pinned command is itself auto-allowed, with the same paths.
		if d2 := Evaluate(stdRequest(d.Pinned)); d2.Outcome != OutcomeRun {
			t.Errorf("%q: pinned %q: %s %s", tt.cmd, d.Pinned, d2.Outcome, d2.Reason)
		}
	}
	// a path with a quote in it
	f := stdFS()
	f.exe("/opt/it's/tool")
	req := stdRequest("'/opt/it'\\''s/tool' x")
	req.Env = f.env(stdPATH, "/", "/home/u")
	req.Allowlist = []AllowEntry{{Pattern: "/opt/**"}}
	d := Evaluate(req)
	if d.Outcome != OutcomeRun || d.Pinned != `'/opt/it'\''s/tool' x` {
		t.Errorf("quoted path: %s %q %s", d.Outcome, d.Pinned, d.Reason)
	}
}

func TestAllowlistRealpathRule(t *testing.T) {
	f := stdFS()
	env := f.env(stdPATH, "/", "/home/u")
	eval := func(cmd, pattern string) string {
		req := stdRequest(cmd)
		req.Env = env
		req.Allowlist = []AllowEntry{{Pattern: pattern, Source: "x"}}
		return Evaluate(req).Outcome
	}
	// python3 → python3.11: a literal pattern matches by realpath
	if o := eval("python3 x.py", "/usr/bin/python3.11"); o != OutcomeRun {
		t.Errorf("literal realpath: %s", o)
	}
	if o := eval("python3.11 x.py", "/usr/bin/python3"); o != OutcomeRun {
		t.Errorf("literal realpath (reverse): %s", o)
	}
	// /bin/git and /usr/bin/git are the same file
	if o := eval("/bin/git status", "/usr/bin/git"); o != OutcomeRun {
		t.Errorf("/bin → /usr/bin: %s", o)
	}
	// a glob matches the resolved path only
	if o := eval("python3 x.py", "/usr/bin/python3.*"); o == OutcomeRun {
		t.Errorf("glob matched the realpath")
	}
	if o := eval("python3 x.py", "/usr/bin/python3*"); o != OutcomeRun {
		t.Errorf("glob on the path: %s", o)
	}
	// bare names are ignored
	if o := eval("git status", "git"); o == OutcomeRun {
		t.Error("bare name matched")
	}
	// "*" matches every resolved segment, but not unresolved ones
	if o := eval("curl x", "*"); o != OutcomeRun {
		t.Errorf("star: %s", o)
	}
	if o := eval("nosuchtool", "*"); o == OutcomeRun {
		t.Error("star matched an unresolved command")
	}
	// home patterns
	if o := eval("~/bin/tool", "~/bin/tool"); o != OutcomeRun {
		t.Errorf("~ pattern: %s", o)
	}
	if o := eval("/home/u/Projects/x/bin/rg -n TODO", "~/Projects/**/bin/rg"); o != OutcomeRun {
		t.Errorf("spec example pattern: %s", o)
	}
}

func TestResolutionFake(t *testing.T) {
	f := stdFS()
	f.exe("/home/u/proj/bin/tool")
	f.symlink("/home/u/proj/ln", "/tmp")
	f.exe("/tmp/tool2")
	f.exe("/home/u/tool2")
	tests := []struct {
		cmd, exe, real string
	}{
		{"git", "/usr/bin/git", "/usr/bin/git"},
		{"/bin/git", "/bin/git", "/usr/bin/git"},
		{"sh", "/usr/bin/sh", "/usr/bin/dash"},
		{"./bin/tool", "/home/u/proj/bin/tool", "/home/u/proj/bin/tool"},
		{"bin/tool", "/home/u/proj/bin/tool", "/home/u/proj/bin/tool"},
		{"bin//./tool", "/home/u/proj/bin/tool", "/home/u/proj/bin/tool"},
		{"~/proj/bin/tool", "/home/u/proj/bin/tool", "/home/u/proj/bin/tool"},
		// ".." is applied after the symlink, as the kernel does
		{"ln/../tool2", "/tool2", ""},
		{"./ln/tool2", "/home/u/proj/ln/tool2", "/tmp/tool2"},
		{"../tool2", "/home/u/tool2", "/home/u/tool2"},
		{"nosuch", "", ""},
		{"/usr/bin/notexec", "", ""},
		{"/usr/bin", "", ""},
		{"'~/proj/bin/tool'", "", ""},
	}
	for _, tt := range tests {
		req := stdRequest(tt.cmd)
		req.Env = f.env(stdPATH, "/home/u/proj", "/home/u")
		d := Evaluate(req)
		if !d.Analysis.OK {
			t.Errorf("%q: %s", tt.cmd, d.Analysis.Reason)
			continue
		}
		s := d.Analysis.Parts[0].Segments[0]
		wantExe := tt.exe
		if tt.real == "" {
			wantExe = ""
		}
		if s.Exe != wantExe || s.RealPath != tt.real {
			t.Errorf("%q: exe %q real %q (%s), want %q %q", tt.cmd, s.Exe, s.RealPath, s.Rule, wantExe, tt.real)
		}
	}
	// empty PATH entries and relative PATH entries are relative to cwd
	req := stdRequest("tool")
	req.Env = f.env("::/usr/bin", "/home/u/proj/bin", "/home/u")
	if s := Evaluate(req).Analysis.Parts[0].Segments[0]; s.Exe != "/home/u/proj/bin/tool" {
		t.Errorf("empty PATH entry: %+v", s)
	}
	req.Env = f.env("bin:/usr/bin", "/home/u/proj", "/home/u")
	if s := Evaluate(req).Analysis.Parts[0].Segments[0]; s.Exe != "/home/u/proj/bin/tool" {
		t.Errorf("relative PATH entry: %+v", s)
	}
	// no cwd: relative commands do not resolve
	req = stdRequest("./bin/tool")
	req.Env = f.env(stdPATH, "", "/home/u")
	if s := Evaluate(req).Analysis.Parts[0].Segments[0]; s.Exe != "" {
		t.Errorf("no cwd: %+v", s)
	}
	// no home: ~ does not resolve
	req = stdRequest("~/proj/bin/tool")
	req.Env = f.env(stdPATH, "/", "")
	if s := Evaluate(req).Analysis.Parts[0].Segments[0]; s.Exe != "" {
		t.Errorf("no home: %+v", s)
	}
}

func TestHeredoc(t *testing.T) {
	req := stdRequest("git apply <<'EOF'\ndiff\nEOF")
	d := Evaluate(req)
	if d.Outcome != OutcomePrompt || !d.Analysis.Heredoc || !slices.Contains(d.Warnings, HeredocWarning) {
		t.Errorf("heredoc: %+v", d)
	}
	if v := verdicts(d); !slices.Equal(v, []string{VerdictAllowlist}) {
		t.Errorf("heredoc segment verdicts: %q", v)
	}
	req.Ask = AskOff
	if d := Evaluate(req); d.Outcome != OutcomeDeny {
		t.Errorf("heredoc ask=off: %s", d.Outcome)
	}
	req = stdRequest("bash -c 'git apply <<EOF\nx\nEOF'")
	if d := Evaluate(req); d.Outcome != OutcomePrompt || !slices.Contains(d.Warnings, HeredocWarning) {
		t.Errorf("inner heredoc: %s %q", d.Outcome, d.Warnings)
	}
	req.Security = SecurityFull
	if d := Evaluate(req); d.Outcome != OutcomeRun || len(d.Warnings) != 0 {
		t.Errorf("heredoc full: %s %q", d.Outcome, d.Warnings)
	}
}

func TestExplainForms(t *testing.T) {
	req := stdRequest("git status > out")
	got := Evaluate(req).Explain("")
	want := "parse: failed — unsupported shell construct: redirection (>) at 1:12\n" +
		"verdict: approval required (ask=on-miss; analysis failed)\npinned: —\nallow-always would persist: —\n"
	if got != want {
		t.Errorf("failed explain:\n%s\nwant:\n%s", got, want)
	}
	req = stdRequest("git status | wc -l")
	got = Evaluate(req).Explain("h")
	if !strings.Contains(got, "verdict: run (every segment satisfied)\npinned: '/usr/bin/git' status | '/usr/bin/wc' '-l'\n") {
		t.Errorf("run explain:\n%s", got)
	}
	req = stdRequest("curl x")
	req.Ask = AskAlways
	if got := Evaluate(req).Explain(""); !strings.Contains(got, "verdict: approval required (ask=always)\n") {
		t.Errorf("always explain:\n%s", got)
	}
	req.Ask = AskOff
	if got := Evaluate(req).Explain(""); !strings.Contains(got, "verdict: denied (exec denied: allowlist miss)\n") {
		t.Errorf("off explain:\n%s", got)
	}
	req.Security = SecurityFull
	if got := Evaluate(req).Explain(""); !strings.Contains(got, "verdict: run (security=full)\n") {
		t.Errorf("full explain:\n%s", got)
	}
}
