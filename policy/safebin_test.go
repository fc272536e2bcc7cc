package policy

import (
	"strings"
	"testing"
)

var allProfiled = []string{"cut", "uniq", "head", "tail", "tr", "wc", "grep", "sort", "jq"}

// safeBinVerdict evaluates cmd with every profiled bin listed and an empty
// allowlist, and returns the verdict and rule of its single segment.
func safeBinVerdict(t *testing.T, cmd string) (string, string) {
	t.Helper()
	req := stdRequest(cmd)
	req.Allowlist = nil
	req.SafeBins = allProfiled
	d := Evaluate(req)
	if !d.Analysis.OK {
		t.Fatalf("%q: analysis failed: %s", cmd, d.Analysis.Reason)
	}
	s := d.Analysis.Parts[0].Segments[0]
	if (s.Verdict == VerdictSafeBins) != (d.Outcome == OutcomeRun) {
		t.Fatalf("%q: verdict %s but outcome %s", cmd, s.Verdict, d.Outcome)
	}
	return s.Verdict, s.Rule
}

// TestSafeBinSpecExamples is the list of documented safe-bin examples.
func TestSafeBinSpecExamples(t *testing.T) {
	rejected := []string{
		"sort -o x", "sort -oX", "sort --output=x", "sort --compress-prog=sh", "grep -R x",
		"wc --files0-from=f", "grep needle", "sort --f=1",
	}
	passed := []string{"sort --ke=1,1", "grep -e needle", "wc -l", "uniq -c", "head -n 5", "tr a-z A-Z"}
	for _, c := range rejected {
		if v, rule := safeBinVerdict(t, c); v == VerdictSafeBins {
			t.Errorf("%q passed (%s), want rejected", c, rule)
		}
	}
	for _, c := range passed {
		if v, rule := safeBinVerdict(t, c); v != VerdictSafeBins {
			t.Errorf("%q rejected (%s), want safe bin", c, rule)
		}
	}
}

// TestSafeBinProfiles covers every built-in profile: allowed and denied
// flags, abbreviations, clusters, values and positional limits.
func TestSafeBinProfiles(t *testing.T) {
	tests := []struct {
		cmd  string
		pass bool
	}{
		// cut
		{"cut -d , -f 1", true},
		{"cut -d, -f1", true},
		{"cut -f1 --complement", true},
		{"cut --fields=1-3 --delimiter=:", true},
		{"cut --fi=1", true}, // unique prefix of --fields
		{"cut -c 1-5 -s -z -n", true},
		{"cut --output-delimiter=x -f1", true},
		{"cut -sf1", true}, // cluster: bool then value with the rest
		{"cut -f 1 file.txt", false},
		{"cut -x", false},
		{"cut --bogus", false},
		{"cut --complement=x", false},
		{"cut -d", false}, // missing value
		// uniq
		{"uniq -c", true},
		{"uniq -cd", true},
		{"uniq -f 2 -s 3 -w 4", true},
		{"uniq --count --ignore-case", true},
		{"uniq --group=separate", true},
		{"uniq --cou", true},
		{"uniq -D -u -i -z", true},
		{"uniq input.txt", false},
		{"uniq in out", false},
		{"uniq --all-repeated", true},
		// head
		{"head", true},
		{"head -n 5", true},
		{"head -n5", true},
		{"head -5", true},
		{"head -c 100", true},
		{"head --lines=5", true},
		{"head --li=5", true},
		{"head --lines 5", true},
		{"head -qv", true},
		{"head -qn 5", true},
		{"head -n -5", true},
		{"head -", false}, // "-" is an operand (a file to the tool)
		{"head -n 5 -- ", true},
		{"head /etc/passwd", false},
		{"head -n 5 file", false},
		{"head -- file", false},
		{"head -n /etc/passwd", false},
		{"head -f", false},
		{"head --follow", false},
		{"head -n", false},
		{"head --quiet=1", false},
		{"head -n '*'", false},
		{"head -n ~", false},
		{"head -n ./x", false},
		{"head -n ../x", false},
		{`head -n 'C:\x'`, false},
		{"head -n 'a\nb'", false},
		{"head -5x", false},
		// tail
		{"tail -n 20", true},
		{"tail -20", true},
		{"tail --pid=1 -n 1", true},
		{"tail --sleep-interval=1 --max-unchanged-stats=2", true},
		{"tail -f", false},
		{"tail -F", false},
		{"tail --follow=name", false},
		{"tail --retry", false},
		{"tail log.txt", false},
		// tr
		{"tr a-z A-Z", true},
		{"tr -d '\\r'", true},
		{"tr -s ' '", true},
		{"tr -cd a-z", true},
		{"tr --delete x", true},
		{"tr --squeeze x", true},              // prefix of --squeeze-repeats
		{"tr", false},                         // below minPositional
		{"tr a b c", false},                   // above maxPositional
		{"tr '[:upper:]' '[:lower:]'", false}, // [ ] are never safe literals
		{"tr -x a b", false},
		{"tr a /etc/passwd", false},
		// wc
		{"wc -l", true},
		{"wc -lwc", true},
		{"wc --lines --words", true},
		{"wc -L -m", true},
		{"wc --max", true},
		{"wc --files0-from=f", false},
		{"wc --files0-from f", false},
		{"wc --files", false}, // prefix of the denied flag
		{"wc file", false},
		{"wc -l file", false},
		// grep
		{"grep -e needle", true},
		{"grep -ie needle", true},
		{"grep -e needle -i -v -n -c", true},
		{"grep --regexp=needle", true},
		{"grep -E -e 'a|b'", true},
		{"grep -A 2 -B 3 -C 1 -e x", true},
		{"grep -m1 -e x", true},
		{"grep --include=x -e x", true},
		{"grep --exclude=x -e x", true},
		{"grep -Fxq -e x", true},
		{"grep needle", false},
		{"grep -e needle file", false},
		{"grep -r -e x", false},
		{"grep -R x", false},
		{"grep -f patterns", false},
		{"grep --file=p", false},
		{"grep -d recurse -e x", false},
		{"grep --recursive -e x", false},
		{"grep --rec -e x", false},
		{"grep --dir=recurse -e x", false},
		{"grep --exclude-from=f -e x", false},
		{"grep --ex=x -e x", false}, // ambiguous: --exclude, --exclude-from, --extended-regexp
		{"grep -e 'a.*b'", false},
		{"grep -ir -e x", false},
		// sort
		{"sort", true},
		{"sort -n", true},
		{"sort -rn", true},
		{"sort -k 2", true},
		{"sort -k2,2 -t ,", true},
		{"sort --key=1,1", true},
		{"sort --ke=1,1", true},
		{"sort --parallel=2", true},
		{"sort -S 1M", false}, // a tiny buffer writes temporary files
		{"sort --buffer-size=1", false},
		{"sort -u -f -V", true},
		{"sort -o x", false},
		{"sort -oX", false},
		{"sort -no x", false},
		{"sort --output=x", false},
		{"sort --out=x", false},
		{"sort --compress-prog=sh", false},
		{"sort -T /tmp", false},
		{"sort --temporary-directory=x", false},
		{"sort --random-source=x", false},
		{"sort --files0-from=f", false},
		{"sort --f=1", false},
		{"sort file", false},
		{"sort -m", false},
		// jq
		{"jq .", true},
		{"jq -r .name", true},
		{"jq -c -S .", true},
		{"jq --indent 4 .", true},
		{"jq", true},
		{"jq -rc .a", true},
		{"jq . file.json", false},
		{"jq -f prog.jq", false},
		{"jq --from-file x", false},
		{"jq --arg x y .", false},
		{"jq --args .", false},
		{"jq -L lib .", false},
		{"jq --rawfile a f .", false},
		{"jq env", false},
		{"jq $ENV.HOME", false},
		{"jq '$ENV.HOME'", false},
		{"jq input_filename", false},
		{"jq 'import \"a\" as a; .'", false},
		{"jq 'include \"a\"; .'", false},
		{"jq .ENVIRONMENT", false}, // fails closed on anything that mentions env
		{"jq '.[]'", false},
	}
	for _, tt := range tests {
		v, rule := safeBinVerdict(t, tt.cmd)
		if got := v == VerdictSafeBins; got != tt.pass {
			t.Errorf("%q: verdict %s (%s), want pass=%v", tt.cmd, v, rule, tt.pass)
		}
	}
}

func TestSafeBinRules(t *testing.T) {
	tests := []struct{ cmd, rule string }{
		{"head -n 5", "profile head (value flag -n)"},
		{"wc -l", "profile wc (bool flag -l)"},
		{"head", "profile head"},
		{"sort --ke=1,1 -rn", "profile sort (value flag --key; bool flags -r, -n)"},
	}
	for _, tt := range tests {
		if _, rule := safeBinVerdict(t, tt.cmd); rule != tt.rule {
			t.Errorf("%q: rule %q, want %q", tt.cmd, rule, tt.rule)
		}
	}
}

func TestSafeBinConditions(t *testing.T) {
	run := func(cmd string, mod func(*Request)) Segment {
		t.Helper()
		req := stdRequest(cmd)
		req.Allowlist = nil
		if mod != nil {
			mod(&req)
		}
		d := Evaluate(req)
		if !d.Analysis.OK {
			t.Fatalf("%q: %s", cmd, d.Analysis.Reason)
		}
		return d.Analysis.Parts[0].Segments[0]
	}
	// not listed by default
	if s := run("sort -n", nil); s.Verdict != VerdictMiss {
		t.Errorf("sort is not a default safe bin: %+v", s)
	}
	// explicit [] disables safe bins
	if s := run("head -n 5", func(r *Request) { r.SafeBins = []string{} }); s.Verdict != VerdictMiss {
		t.Errorf("empty SafeBins: %+v", s)
	}
	// lower-cased list entries
	if s := run("sort -n", func(r *Request) { r.SafeBins = []string{" SORT "} }); s.Verdict != VerdictSafeBins {
		t.Errorf("SafeBins are lower-cased: %+v", s)
	}
	// HEAD (libwww-perl) is not head
	if s := run("HEAD", nil); s.Verdict != VerdictMiss {
		t.Errorf("HEAD is not head: %+v", s)
	}
	// unprofiled entries are ignored
	if s := run("cat", func(r *Request) { r.SafeBins = []string{"cat"} }); s.Verdict != VerdictMiss || !strings.Contains(s.Rule, "no profile") {
		t.Errorf("unprofiled safe bin: %+v", s)
	}
	// a custom profile makes it a safe bin; it overrides a built-in
	custom := func(r *Request) {
		r.SafeBins = []string{"cat", "head"}
		r.Profiles = map[string]Profile{
			"cat":  {AllowedBoolFlags: []string{" -n ", "-n"}},
			"head": {AllowedBoolFlags: []string{"-q"}, DeniedFlags: []string{"-n"}},
		}
	}
	if s := run("cat -n", custom); s.Verdict != VerdictSafeBins {
		t.Errorf("custom profile: %+v", s)
	}
	if s := run("head -n 5", custom); s.Verdict != VerdictMiss {
		t.Errorf("custom profile overrides built-in: %+v", s)
	}
	// max < min ⇒ max = min
	minmax := func(r *Request) {
		r.SafeBins = []string{"cat"}
		r.Profiles = map[string]Profile{"cat": {MinPositional: 1, MaxPositional: 0}}
	}
	if s := run("cat a", minmax); s.Verdict != VerdictSafeBins {
		t.Errorf("max<min: %+v", s)
	}
	if s := run("cat a b", minmax); s.Verdict != VerdictMiss {
		t.Errorf("max<min: %+v", s)
	}
	// the jq filter rule holds with a custom jq profile too
	if s := run("jq env", func(r *Request) {
		r.SafeBins = []string{"jq"}
		r.Profiles = map[string]Profile{"jq": {MaxPositional: 1}}
	}); s.Verdict != VerdictMiss {
		t.Errorf("jq env with a custom profile: %+v", s)
	}
	// expansions of any kind
	for _, c := range []string{"head -n $N", "head -n \"$N\"", "tr a-z {A,B}", "tr ~ x", "head -n 5*", "head -n ?", `head -n "$~x"`} {
		if s := run(c, nil); s.Verdict == VerdictSafeBins {
			t.Errorf("%q with an expansion passed", c)
		}
	}
	// a zsh parameter flag fails the analysis (TestZshParameterFlags)
	if d := Evaluate(stdRequest("head -n $=x")); d.Analysis.OK || d.Outcome == OutcomeRun {
		t.Errorf("head -n $=x: %s %s", d.Outcome, d.Reason)
	}
	// a head outside the trusted dirs
	if s := run("/usr/local/bin/head -n 5", func(r *Request) {
		f := stdFS()
		f.exe("/usr/local/bin/head")
		r.Env = f.env(stdPATH, "/", "/home/u")
	}); s.Verdict != VerdictMiss {
		t.Errorf("untrusted head: %+v", s)
	}
	// PATH order finds an untrusted head first
	if s := run("head -n 5", func(r *Request) {
		f := stdFS()
		f.exe("/usr/local/bin/head")
		r.Env = f.env(stdPATH, "/", "/home/u")
	}); s.Verdict != VerdictMiss || s.Exe != "/usr/local/bin/head" {
		t.Errorf("untrusted head on PATH: %+v", s)
	}
	// ... unless that directory is trusted
	if s := run("head -n 5", func(r *Request) {
		f := stdFS()
		f.exe("/usr/local/bin/head")
		r.Env = f.env(stdPATH, "/", "/home/u")
		r.TrustedDirs = []string{"/usr/local/bin/"}
	}); s.Verdict != VerdictSafeBins {
		t.Errorf("trusted /usr/local/bin head: %+v", s)
	}
	// a symlink in a trusted dir to a file elsewhere is not trusted
	if s := run("head -n 5", func(r *Request) {
		f := stdFS()
		f.exe("/opt/evil/head")
		f.symlink("/usr/local/bin/head", "/opt/evil/head")
		r.Env = f.env(stdPATH, "/", "/home/u")
		r.TrustedDirs = []string{"/usr/local/bin"}
	}); s.Verdict != VerdictMiss {
		t.Errorf("symlink out of the trusted dir: %+v", s)
	}
	// a "head" in a trusted dir that is really another binary
	if s := run("head -n 5", func(r *Request) {
		f := stdFS()
		f.symlink("/usr/local/bin/head", "/usr/bin/rm")
		r.Env = f.env(stdPATH, "/", "/home/u")
		r.TrustedDirs = []string{"/usr/local/bin"}
	}); s.Verdict != VerdictMiss {
		t.Errorf("head → rm: %+v", s)
	}
	// a coreutils multi-call symlink is fine
	if s := run("head -n 5", func(r *Request) {
		f := stdFS()
		f.exe("/usr/bin/coreutils")
		f.symlink("/usr/bin/head", "coreutils")
		r.Env = f.env(stdPATH, "/", "/home/u")
	}); s.Verdict != VerdictSafeBins {
		t.Errorf("coreutils head: %+v", s)
	}
	// relative trusted dirs are ignored with a warning
	req := stdRequest("head -n 5")
	req.TrustedDirs = []string{"bin"}
	if d := Evaluate(req); len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], `"bin"`) {
		t.Errorf("relative trusted dir warnings: %q", d.Warnings)
	}
}

func TestCheckProfile(t *testing.T) {
	if r := CheckProfile("head", BuiltinProfiles["head"], []string{"-n", "5"}); r != "" {
		t.Errorf("head -n 5: %s", r)
	}
	if r := CheckProfile("sort", BuiltinProfiles["sort"], []string{"--f=1"}); r != "ambiguous flag --f" {
		t.Errorf("sort --f=1: %q", r)
	}
	if r := CheckProfile("x", Profile{}, []string{"--=x"}); r == "" {
		t.Error("--=x passed")
	}
}
