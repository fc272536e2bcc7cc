package policy

import (
	"reflect"
	"strings"
	"testing"
)

const usc = "unsupported shell construct: "

// TestAnalyzeFailsClosed covers every construct the analysis refuses.
func TestAnalyzeFailsClosed(t *testing.T) {
	tests := []struct {
		cmd    string
		reason string // exact, or a prefix when it ends with "…"
		pos    string // "" = not checked
	}{
		// redirections
		{"git status > out", usc + "redirection (>)", "1:12"},
		{"git status >> out", usc + "redirection (>>)", ""},
		{"wc -l < file", usc + "redirection (<)", ""},
		{"git status 2>&1", usc + "redirection (2>&)", ""},
		{"git status &> out", usc + "redirection (&>)", ""},
		{"git status >| out", usc + "redirection (>|)", ""},
		{"cat <> file", usc + "redirection (<>)", ""},
		{"git status >&2", usc + "redirection (>&)", ""},
		{"cat <&3", usc + "redirection (<&)", ""},
		{"git status 2>/dev/null", usc + "redirection (2>)", ""},
		{"git status &>> out", usc + "redirection (&>>)", ""},
		{"> out", usc + "redirection (>)", ""},
		{"git log | head > x", usc + "redirection (>)", ""},
		// command substitution, anywhere
		{"echo $(whoami)", usc + "command substitution ($(…))", "1:6"},
		{"echo `whoami`", usc + "command substitution (`…`)", ""},
		{`echo "$(whoami)"`, usc + "command substitution ($(…))", ""},
		{"echo \"a `id` b\"", usc + "command substitution (`…`)", ""},
		{"$(which git) status", usc + "command substitution ($(…))", ""},
		{"cat <<EOF\n$(id)\nEOF", reasonHeredocSubst, ""},
		{"echo a$(id)b", usc + "command substitution ($(…))", ""},
		// process substitution
		{"diff <(ls) <(ls -a)", usc + "process substitution (<(…))", ""},
		{"tee >(cat)", usc + "process substitution (>(…))", ""},
		// arithmetic
		{"echo $((1+2))", usc + "arithmetic ($((…)))", ""},
		{"((x=1))", usc + "arithmetic ((( … )))", ""},
		{"echo $[1+2]", usc + "arithmetic ($((…)))", ""},
		// parameter expansion with operators
		{"echo ${x:-y}", usc + "parameter expansion with operators (${…})", ""},
		{"echo ${#x}", usc + "parameter expansion with operators (${…})", ""},
		{"echo ${!x}", usc + "parameter expansion with operators (${…})", ""},
		{"echo ${x@P}", usc + "parameter expansion with operators (${…})", ""},
		{"echo ${x/a/b}", usc + "parameter expansion with operators (${…})", ""},
		{"echo ${x:1}", usc + "parameter expansion with operators (${…})", ""},
		{"echo ${x[0]}", usc + "parameter expansion with operators (${…})", ""},
		{`echo "${x:=y}"`, usc + "parameter expansion with operators (${…})", ""},
		{"echo $@", usc + "special parameter ($@)", ""},
		{"echo $1", usc + "special parameter ($1)", ""},
		{"echo $$", usc + "special parameter ($$)", ""},
		// subshell, group
		{"( git status )", usc + "subshell ( … )", "1:1"},
		{"{ git status; }", usc + "group { …; }", ""},
		{"git status && (rm -rf /)", usc + "subshell ( … )", ""},
		// background, coprocess, |&
		{"git status &", usc + "background (&)", "1:12"},
		{"git status & echo hi", usc + "background (&)", ""},
		{"coproc git status", usc + "coprocess (coproc)", ""},
		{"git log |& head", usc + "pipe with stderr (|&)", ""},
		// compound commands, functions
		{"if true; then echo hi; fi", usc + "compound command (if)", ""},
		{"while true; do echo hi; done", usc + "compound command (while)", ""},
		{"until false; do echo hi; done", usc + "compound command (until)", ""},
		{"for x in a b; do echo $x; done", usc + "compound command (for)", ""},
		{"case x in x) echo hi;; esac", usc + "compound command (case)", ""},
		{"select x in a b; do echo $x; done", usc + "compound command (select)", ""},
		{"f() { echo hi; }; f", usc + "function definition", ""},
		{"function f { echo hi; }", usc + "function definition", ""},
		{"[[ -f x ]]", usc + "test expression ([[ … ]])", ""},
		// declarations, let, time, !
		{"export FOO=1", usc + "declaration (export)", ""},
		{"declare -x FOO=1", usc + "declaration (declare)", ""},
		{"local x=1", usc + "declaration (local)", ""},
		{"readonly x=1", usc + "declaration (readonly)", ""},
		{"typeset x=1", usc + "declaration (typeset)", ""},
		{"let x=1", usc + "let", ""},
		{"time git status", usc + "time", ""},
		{"! git status", usc + "negation (!)", ""},
		// assignments
		{"FOO=1 git status", usc + "env-prefix assignment (FOO=…)", "1:1"},
		{"FOO=1", usc + "assignment (FOO=…)", ""},
		{"PATH=/tmp git status", usc + "env-prefix assignment (PATH=…)", ""},
		{"git status; X=1", usc + "assignment (X=…)", ""},
		// quoting
		{`echo $'\x41'`, usc + "ANSI-C quoting ($'…')", ""},
		{`echo $"hello"`, usc + `locale quoting ($"…")`, ""},
		{`$'\x67it' status`, usc + "ANSI-C quoting ($'…')", ""},
		// extended globs
		{"ls @(a|b)", usc + "extended glob (@(…))", ""},
		{"ls !(x)", usc + "extended glob (!(…))", ""},
		{"ls *(x)", usc + "extended glob (*(…))", ""},
		{"ls +(x)", usc + "extended glob (+(…))", ""},
		{"ls ?(x)", usc + "extended glob (?(…))", ""},
		// here-strings
		{"cat <<< text", usc + "here-string (<<<)", ""},
		// newlines
		{"git status\nrm -rf /", usc + "newline", "1:11"},
		{"git status\n\nrm -rf /", usc + "newline", ""},
		{"git status &&\nrm -rf /", usc + "newline", ""},
		{"git status |\nwc -l", usc + "newline", ""},
		{"git status # c\nrm -rf /", usc + "newline", ""},
		{"cat <<EOF && rm -rf /tmp/x\nbody\nEOF\ngit status", usc + "newline", ""},
		{"git status\r\nrm -rf /", reasonControlChar, ""},
		// line continuation
		{"git sta\\\ntus", reasonContinuation, "1:8"},
		{"git status \\\r\n; rm", reasonControlChar, ""},
		{"echo 'a\\\nb'", reasonContinuation, ""},
		{"echo \"a\\\nb\"", reasonContinuation, ""},
		{"r\\\nm -rf /", reasonContinuation, ""},
		// non-literal first word
		{"$EDITOR x", usc + "non-literal command name ($EDITOR)", "1:1"},
		{"./b*n/tool", usc + "non-literal command name (./b*n/tool)", ""},
		{"${X} status", usc + "non-literal command name (${X})", ""},
		{`"$X" status`, usc + "non-literal command name (\"$X\")", ""},
		{"gi? status", usc + "non-literal command name (gi?)", ""},
		{"/usr/bin/[g]it status", usc + "non-literal command name (/usr/bin/[g]it)", ""},
		{"{git,status}", usc + "non-literal command name ({git,status})", ""},
		{"{git,}", usc + "non-literal command name ({git,})", ""},
		{"git{,} status", usc + "non-literal command name (git{,})", ""},
		{"{g..h}it", usc + "non-literal command name ({g..h}it)", ""},
		{`{g,"x"}it`, usc + "non-literal command name ({g,\"x\"}it)", ""},
		{"~root/bin/x", usc + "non-literal command name (~root/bin/x)", ""},
		{"~+/x", usc + "non-literal command name (~+/x)", ""},
		{"git$IFS status", usc + "non-literal command name (git$IFS)", ""},
		{"git${IFS}status", usc + "non-literal command name (git${IFS}status)", ""},
		{"git$=x status", usc + "non-literal command name (git$=x)", ""},
		{`"git$=x" status`, usc + "non-literal command name (\"git$=x\")", ""},
		// NUL
		{"git status\x00; rm -rf /", reasonInvalidChar, "1:11"},
		// heredoc bodies
		{"cat <<EOF\n`id`\nEOF", reasonHeredocSubst, ""},
		{"cat <<EOF\n${HOME}\nEOF", reasonHeredocSubst, ""},
		{"cat <<EOF\n$((1+1))\nEOF", reasonHeredocSubst, ""},
		{"cat <<EOF\n${x:-$(id)}\nEOF", reasonHeredocSubst, ""},
		{"cat <<EOF\nhello", reasonHeredocUnclosed, ""},
		{"cat <<EOF", reasonHeredocUnclosed, ""},
		{"cat <<EOF\nEOF", usc + "empty heredoc", ""},
		// empty
		{"", reasonEmpty, ""},
		{"   \t ", reasonEmpty, ""},
		{"\n\n", reasonEmpty, ""},
		{"# just a comment", reasonEmpty, ""},
		// parse errors
		{"a | | b", "parse error: …", ""},
		{"git status |", "parse error: …", ""},
		{"git status &&", "parse error: …", ""},
		{"git status ||", "parse error: …", ""},
		{"; git status", "parse error: …", ""},
		{"git 'status", "parse error: …", ""},
		{`git "status`, "parse error: …", ""},
		{"echo $(", "parse error: …", ""},
	}
	for _, tt := range tests {
		a := Analyze(tt.cmd)
		if a.OK {
			t.Errorf("Analyze(%q) OK, want failure %q", tt.cmd, tt.reason)
			continue
		}
		if p, ok := strings.CutSuffix(tt.reason, "…"); ok {
			if !strings.HasPrefix(a.Reason, p) {
				t.Errorf("Analyze(%q) reason %q, want prefix %q", tt.cmd, a.Reason, p)
			}
		} else if a.Reason != tt.reason {
			t.Errorf("Analyze(%q) reason %q, want %q", tt.cmd, a.Reason, tt.reason)
		}
		if tt.pos != "" && a.Pos != tt.pos {
			t.Errorf("Analyze(%q) pos %q, want %q", tt.cmd, a.Pos, tt.pos)
		}
		if len(a.Parts) != 0 {
			t.Errorf("Analyze(%q) failed but has parts", tt.cmd)
		}
	}
}

// TestAnalyzeAccepted covers the accepted shapes and the quoted look-alikes
// of refused constructs.
func TestAnalyzeAccepted(t *testing.T) {
	type seg = []string // argv
	tests := []struct {
		cmd     string
		parts   [][]seg
		ops     []string
		heredoc bool
	}{
		{"git status", [][]seg{{{"git", "status"}}}, []string{""}, false},
		{"git status; ls", [][]seg{{{"git", "status"}}, {{"ls"}}}, []string{"", ";"}, false},
		{"a && b || c", [][]seg{{{"a"}}, {{"b"}}, {{"c"}}}, []string{"", "&&", "||"}, false},
		{"git log | head -n 5 | wc -l", [][]seg{{{"git", "log"}, {"head", "-n", "5"}, {"wc", "-l"}}}, []string{""}, false},
		{"a | b && c | d; e", [][]seg{{{"a"}, {"b"}}, {{"c"}, {"d"}}, {{"e"}}}, []string{"", "&&", ";"}, false},
		{"git status # comment", [][]seg{{{"git", "status"}}}, []string{""}, false},
		{"git status;", [][]seg{{{"git", "status"}}}, []string{""}, false},
		{"'git' \"status\"", [][]seg{{{"git", "status"}}}, []string{""}, false},
		{"echo '$(whoami)'", [][]seg{{{"echo", "$(whoami)"}}}, []string{""}, false},
		{`echo "\$(whoami)"`, [][]seg{{{"echo", "$(whoami)"}}}, []string{""}, false},
		{`echo "a;b" 'c|d'`, [][]seg{{{"echo", "a;b", "c|d"}}}, []string{""}, false},
		{"echo *.go", [][]seg{{{"echo", "*.go"}}}, []string{""}, false},
		{"echo {a,b}", [][]seg{{{"echo", "{a,b}"}}}, []string{""}, false},
		{"echo ~/x", [][]seg{{{"echo", "~/x"}}}, []string{""}, false},
		{"echo $HOME ${USER} \"$X\"", [][]seg{{{"echo", "$HOME", "${USER}", "\"$X\""}}}, []string{""}, false},
		{"~/bin/tool x", [][]seg{{{"~/bin/tool", "x"}}}, []string{""}, false},
		{"g\\it status", [][]seg{{{"git", "status"}}}, []string{""}, false},
		{"echo 'a\nb'", [][]seg{{{"echo", "a\nb"}}}, []string{""}, false},
		{"  git status  \n", [][]seg{{{"git", "status"}}}, []string{""}, false},
		{"cat <<EOF\nhello $USER\nEOF", [][]seg{{{"cat"}}}, []string{""}, true},
		{"cat <<-EOF\n\thello\n\tEOF", [][]seg{{{"cat"}}}, []string{""}, true},
		{"cat <<'EOF'\n$(id) `id` ${x:-y}\nEOF", [][]seg{{{"cat"}}}, []string{""}, true},
		{"cat <<\"EOF\"\n$(id)\nEOF", [][]seg{{{"cat"}}}, []string{""}, true},
		{"cat <<EOF | wc -l\nx\nEOF", [][]seg{{{"cat"}, {"wc", "-l"}}}, []string{""}, true},
		{"cat <<A <<B\na\nA\nb\nB", [][]seg{{{"cat"}}}, []string{""}, true},
		{"cat <<EOF\n\\$(id)\nEOF", [][]seg{{{"cat"}}}, []string{""}, true},
	}
	for _, tt := range tests {
		a := Analyze(tt.cmd)
		if !a.OK {
			t.Errorf("Analyze(%q) failed: %s at %s", tt.cmd, a.Reason, a.Pos)
			continue
		}
		var got [][]seg
		var ops []string
		for _, p := range a.Parts {
			var segs []seg
			for _, s := range p.Segments {
				segs = append(segs, s.Argv)
			}
			got = append(got, segs)
			ops = append(ops, p.Op)
		}
		if !reflect.DeepEqual(got, tt.parts) || !reflect.DeepEqual(ops, tt.ops) {
			t.Errorf("Analyze(%q) = %q ops %q, want %q ops %q", tt.cmd, got, ops, tt.parts, tt.ops)
		}
		if a.Heredoc != tt.heredoc {
			t.Errorf("Analyze(%q) heredoc %v", tt.cmd, a.Heredoc)
		}
	}
}

func TestSegmentText(t *testing.T) {
	a := Analyze("cat <<EOF | head -n 1\nbody\nEOF")
	if !a.OK {
		t.Fatal(a.Reason)
	}
	if got := a.Parts[0].Segments[0].Text; got != "cat <<EOF" {
		t.Errorf("text %q", got)
	}
	if got := a.Parts[0].Segments[1].Text; got != "head -n 1" {
		t.Errorf("text %q", got)
	}
}

// TestAnalyzeLengthCap: a command over MaxCommandBytes fails the analysis
// before the parser sees it (deep nesting would overflow its stack); one
// at the cap is parsed.
func TestAnalyzeLengthCap(t *testing.T) {
	deep := func(n int) string {
		k := (n - 1) / 3
		return "echo " + strings.Repeat("$(", k) + "x" + strings.Repeat(")", k)
	}
	if a := Analyze(deep(4 << 20)); a.OK || !strings.Contains(a.Reason, "longer than 131071") {
		t.Fatalf("4 MiB of nesting: OK %v reason %q", a.OK, a.Reason)
	}
	cmd := deep(MaxCommandBytes - 5)
	if len(cmd) > MaxCommandBytes {
		t.Fatalf("generated %d bytes", len(cmd))
	}
	if a := Analyze(cmd); strings.Contains(a.Reason, "longer than") {
		t.Fatalf("at the cap: %q", a.Reason)
	}
}

// TestControlCharacters: a control character other than tab and newline
// fails the analysis wherever it is (the parser read a carriage return as
// a blank, bash as part of a word: `echo a<CR>#; touch x` was one
// harmless segment to the analysis and ran touch under bash). Generated
// for every such byte in every position of a few shapes.
func TestControlCharacters(t *testing.T) {
	for c := 0; c < 0x80; c++ {
		if (c >= 0x20 && c != 0x7f) || c == '\t' || c == '\n' || c == 0 {
			continue
		}
		b := string(rune(c))
		for _, cmd := range []string{"echo a" + b + "#; touch x", "echo a" + b + "; touch x", "echo " + b, b + "echo hi",
			"echo 'a" + b + "'", `echo "a` + b + `"`, "echo hi" + b, "bash -c 'echo a" + b + "#; touch x'", "git status" + b + "\n"} {
			if a := Analyze(cmd); a.OK || a.Reason != reasonControlChar {
				t.Errorf("%q: ok=%v %q", cmd, a.OK, a.Reason)
			}
		}
	}
	for _, cmd := range []string{"echo a\tb", "echo 'a\tb'"} {
		if a := Analyze(cmd); !a.OK {
			t.Errorf("%q: %s", cmd, a.Reason)
		}
	}
}
