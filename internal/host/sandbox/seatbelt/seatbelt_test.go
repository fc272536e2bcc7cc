package seatbelt

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// macCanon stands in for the kernel's view on macOS: /tmp, /var and /etc
// are symlinks into /private.
func macCanon(p string) string {
	for _, l := range []string{"/tmp", "/var", "/etc"} {
		if p == l || strings.HasPrefix(p, l+"/") {
			return "/private" + p
		}
	}
	return p
}

func basePolicy() Policy {
	return Policy{
		Workspace: "/Users/me/src/app", Access: "rw", Protect: []string{".git/hooks", ".git/config", ".conch"},
		GitAccess: "ro", Network: "none", Home: "/Users/me", ConchHome: "/Users/me/.conch",
		ScopeHome: "/Users/me/.conch/sandboxes/agent-main/home", ScopeTmp: "/var/folders/xy/T/conch-agent-main",
	}
}

// TestProfileGolden: the profile and command line of every sandbox
// setting, access rw/ro × network none/open × PTY, and one with binds
// and a hidden directory (testdata/<setting>.sb; -update rewrites them).
func TestProfileGolden(t *testing.T) {
	extra := basePolicy()
	extra.Hidden = []string{"/Users/me/src/real"}
	extra.Read = []string{"/opt/data"}
	extra.Write = []string{"/tmp/cache"}
	extra.Protect = append(extra.Protect, "vendor/keep/x", "sub/.git/hooks")
	goldenProfile(t, "rw-binds-hidden", extra)
	for _, access := range []string{"rw", "ro"} {
		for _, network := range []string{"none", "open"} {
			for _, pty := range []bool{false, true} {
				name := fmt.Sprintf("%s-net-%s", access, network)
				if pty {
					name += "-pty"
				}
				pol := basePolicy()
				pol.Access, pol.Network, pol.PTY = access, network, pty
				goldenProfile(t, name, pol)
			}
		}
	}
}

func goldenProfile(t *testing.T, name string, pol Policy) {
	t.Run(name, func(t *testing.T) {
		prof, err := Generate(pol, macCanon)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		b.WriteString(prof.Text)
		b.WriteString("\n;; command line\n")
		for _, a := range prof.Args("/bin/sh", "-c", "make test") {
			if a == prof.Text {
				a = "<profile>"
			}
			fmt.Fprintf(&b, ";; %q\n", a)
		}
		checkGolden(t, filepath.Join("testdata", name+".sb"), b.String())
	})
}

// checkGolden compares got with the golden file (-update rewrites it).
func checkGolden(t *testing.T, golden, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s changed:\n%s", golden, got)
	}
}

// TestProfileProperties, over generated policies (paths with spaces,
// quotes, parentheses, newlines and SBPL syntax in them):
//   - no path appears in the text: every path is a parameter;
//   - every parameter the text uses is defined, and every one defined is
//     used; parameter values are canonical;
//   - network none allows no network operation; open does;
//   - every protected path of a rw workspace is denied as a literal and
//     as a subpath, after the rule that makes the workspace writable;
//   - the directories between the workspace and a protected path are
//     denied as literals, after that rule too;
//   - hidden directories are denied before anything is given back;
//   - a ro workspace has no write allow on the workspace.
func TestProfileProperties(t *testing.T) {
	odd := []string{"plain", "with space", `quo"te`, "paren)(", "new\nline", `back\slash`, "(allow default)", "semi;colon", "ünï"}
	n := 0
	for _, ws := range odd {
		for _, home := range []string{"/Users/" + ws, "/tmp/" + ws} {
			for _, access := range []string{"rw", "ro"} {
				for _, network := range []string{"none", "open"} {
					n++
					pol := basePolicy()
					pol.PTY = n%2 == 0
					pol.GitAccess = []string{"ro", "rw"}[n/2%2]
					pol.Home = home
					pol.Workspace = home + "/work/" + ws
					pol.ConchHome = home + "/.conch"
					pol.ScopeHome = pol.ConchHome + "/sandboxes/s/home"
					pol.Hidden = []string{home + "/real/" + ws}
					pol.Read = []string{"/opt/" + ws}
					pol.Write = []string{"/Volumes/" + ws + "/cache"}
					pol.Protect = []string{".git/hooks", ws, "../" + ws, ws + "/deep/" + ws}
					pol.Access, pol.Network = access, network
					checkProperties(t, pol)
				}
			}
		}
	}
	if n < 70 {
		t.Fatalf("only %d policies generated", n)
	}
}

func checkProperties(t *testing.T, pol Policy) {
	t.Helper()
	prof, err := Generate(pol, macCanon)
	if pol.Access == "rw" && strings.Contains(pol.Workspace, "\n") {
		if !errors.Is(err, ErrControlChar) {
			t.Errorf("%q: %v, want ErrControlChar", pol.Workspace, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%+v: %v", pol, err)
	}
	text := outsideRegexes(t, prof.Text)
	for _, p := range append(append([]string{pol.Workspace, pol.Home, pol.ConchHome, pol.ScopeHome, pol.ScopeTmp}, pol.Hidden...), append(pol.Read, pol.Write...)...) {
		if strings.Contains(text, p) {
			t.Errorf("%q appears in the profile text", p)
		}
	}
	if pol.Access == "rw" {
		checkFolds(t, pol, prof.Text)
	}
	defined := map[string]bool{}
	for _, d := range prof.Params {
		if defined[d.Name] {
			t.Errorf("parameter %s defined twice", d.Name)
		}
		defined[d.Name] = true
		if macCanon(d.Value) != d.Value {
			t.Errorf("parameter %s=%q is not canonical", d.Name, d.Value)
		}
		if !strings.Contains(text, fmt.Sprintf("(param %q)", d.Name)) {
			t.Errorf("parameter %s is never used", d.Name)
		}
	}
	for rest := text; ; {
		i := strings.Index(rest, `(param "`)
		if i < 0 {
			break
		}
		rest = rest[i+len(`(param "`):]
		name := rest[:strings.IndexByte(rest, '"')]
		if !defined[name] {
			t.Errorf("parameter %s used but not defined", name)
		}
	}
	allowsNet := strings.Contains(text, "(allow network")
	if (pol.Network == "open") != allowsNet {
		t.Errorf("network %s: allow network present = %v", pol.Network, allowsNet)
	}
	lines := strings.Split(text, "\n")
	firstGiven := slices.IndexFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "(allow") && strings.Contains(l, `(param "WORKSPACE")`)
	})
	for _, d := range prof.Params {
		if strings.HasPrefix(d.Name, "HIDDEN_") || d.Name == "HOME" || d.Name == "CONCH_HOME" {
			ref := fmt.Sprintf("(subpath (param %q))", d.Name)
			deny := slices.IndexFunc(lines, func(l string) bool {
				return strings.HasPrefix(l, "(deny file-read* file-write*") && strings.Contains(l, ref)
			})
			if deny < 0 || deny > firstGiven {
				t.Errorf("%s: not denied before the workspace is given back", d.Name)
			}
		}
	}
	wsWrite := slices.IndexFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "(allow") && strings.Contains(l, "file-write*") && strings.Contains(l, `(param "WORKSPACE")`)
	})
	if pol.Access == "ro" {
		if wsWrite >= 0 {
			t.Errorf("access %s: the workspace is writable: %s", pol.Access, lines[wsWrite])
		}
		return
	}
	if wsWrite < 0 {
		t.Fatalf("access rw: no write allow on the workspace")
	}
	for _, d := range prof.Params {
		if !strings.HasPrefix(d.Name, "PROTECT_") && d.Name != "GIT_DIR" {
			continue
		}
		ref := fmt.Sprintf("(param %q)", d.Name)
		deny := slices.IndexFunc(lines, func(l string) bool {
			return strings.HasPrefix(l, "(deny file-write*") && strings.Contains(l, "(literal "+ref+")")
		})
		if deny < wsWrite {
			t.Errorf("%s=%q: no literal deny after the workspace's write allow", d.Name, d.Value)
			continue
		}
		if d.Name != "GIT_DIR" && !strings.HasPrefix(d.Name, "PROTECT_PARENT_") || d.Name == "GIT_DIR" && pol.GitAccess != "rw" {
			if !strings.Contains(lines[deny], "(subpath "+ref+")") {
				t.Errorf("%s: no subpath deny: %s", d.Name, lines[deny])
			}
		}
		if !strings.HasPrefix(d.Value, macCanon(pol.Workspace)+"/") {
			t.Errorf("%s=%q is outside the workspace", d.Name, d.Value)
		}
	}
	// Every directory between the workspace and a protected path (but
	// .git, which has its own rule) is a PROTECT_PARENT_ literal.
	values := map[string]bool{}
	for _, d := range prof.Params {
		if strings.HasPrefix(d.Name, "PROTECT_PARENT_") {
			values[d.Value] = true
		}
	}
	for _, rel := range cleanRel(pol.Protect) {
		for dir := filepath.Dir(rel); dir != "."; dir = filepath.Dir(dir) {
			if p := macCanon(filepath.Join(pol.Workspace, dir)); dir != ".git" && !values[p] {
				t.Errorf("%s, above the protected %s, is not denied", p, rel)
			}
		}
	}
}

// foldLine is a rule of the case-insensitive denials: a regex literal
// that holds no double quote (it cannot end early).
var foldLine = regexp.MustCompile(`^\(deny file-write\* \(regex #"([^"]*)"\)\)$`)

// outsideRegexes is text without its case-insensitive denials (the one
// place a path is text of the profile), each checked to be a whole
// literal.
func outsideRegexes(t *testing.T, text string) string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "(deny file-write* (regex") {
			if !foldLine.MatchString(l) {
				t.Errorf("a regex rule that is not one literal: %s", l)
			}
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// checkFolds: every protected path, .git and the directories between
// are denied by a regex that matches them in any letter case (and what
// lies below them, but for .git with gitAccess rw and those
// directories), anchored at the canonical workspace, and that matches no
// sibling name.
func checkFolds(t *testing.T, pol Policy, text string) {
	t.Helper()
	var res []*regexp.Regexp
	for _, l := range strings.Split(text, "\n") {
		if m := foldLine.FindStringSubmatch(l); m != nil {
			re, err := regexp.Compile(m[1])
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			res = append(res, re)
		}
	}
	denied := func(p string) bool {
		for _, re := range res {
			if re.MatchString(p) {
				return true
			}
		}
		return false
	}
	ws := macCanon(filepath.Clean(pol.Workspace))
	protect := cleanRel(pol.Protect)
	for _, rel := range append(append([]string{".git"}, protect...), between(protect)...) {
		for _, v := range []string{rel, strings.ToUpper(rel), swapCase(rel)} {
			if p := path.Join(ws, v); !denied(p) {
				t.Errorf("%s is not denied in any case", p)
			}
		}
		trees := protect
		if pol.GitAccess != "rw" {
			trees = append([]string{".git"}, protect...)
		}
		if p := path.Join(ws, rel+"x"); denied(p) && !slices.ContainsFunc(trees, func(q string) bool { return strings.HasPrefix(rel+"x", q+"/") }) {
			t.Errorf("the sibling %s is denied", p)
		}
	}
	for _, rel := range protect {
		if p := path.Join(ws, strings.ToUpper(rel), "deeper"); !denied(p) {
			t.Errorf("%s is not denied", p)
		}
	}
	if p := path.Join(ws, ".GIT/config"); denied(p) != (pol.GitAccess != "rw" || slices.Contains(protect, ".git/config")) {
		t.Errorf("%s denied: %v with gitAccess %s", p, denied(p), pol.GitAccess)
	}
	if denied(path.Join(ws, "src/main.go")) || denied(ws) {
		t.Error("the workspace itself is denied")
	}
}

func swapCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i%2 == 0 {
			b.WriteString(strings.ToUpper(string(r)))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestGenerateRefuses: unknown settings and relative paths are errors,
// never a profile.
func TestGenerateRefuses(t *testing.T) {
	for name, mut := range map[string]func(*Policy){
		"access":        func(p *Policy) { p.Access = "write" },
		"access none":   func(p *Policy) { p.Access = "none" },
		"relative bind": func(p *Policy) { p.Write = []string{"cache"} },
		"network":       func(p *Policy) { p.Network = "loopback" },
		"relative ws":   func(p *Policy) { p.Workspace = "src/app" },
		"relative home": func(p *Policy) { p.Home = "me" },
		"no workspace":  func(p *Policy) { p.Workspace = "" },
	} {
		pol := basePolicy()
		mut(&pol)
		if _, err := Generate(pol, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzGenerate: whatever the workspace path, it reaches the text only in
// the case-insensitive denials, each one whole regex literal that
// matches the protected paths in any case and no sibling; a path with a
// control character is refused.
func FuzzGenerate(f *testing.F) {
	f.Add("/Users/me/src")
	f.Add("/tmp/\")(allow default)(\"")
	f.Fuzz(func(t *testing.T, ws string) {
		if !strings.HasPrefix(ws, "/") || len(ws) < 3 {
			return
		}
		pol := basePolicy()
		pol.Workspace = ws
		prof, err := Generate(pol, nil)
		if errors.Is(err, ErrControlChar) && strings.ContainsFunc(ws, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		clean := filepath.Clean(ws)
		if clean != "/" && strings.Contains(outsideRegexes(t, prof.Text), clean) && !strings.Contains(basePolicyText, clean) {
			t.Fatalf("workspace %q appears in the text", clean)
		}
		if !utf8.ValidString(clean) || strings.ContainsFunc(clean, func(r rune) bool { return r == '"' || r < 0x20 || r == 0x7f }) {
			return // matched by a wildcard; Go's regexp reads runes, SBPL's bytes
		}
		checkFolds(t, pol, prof.Text)
	})
}

// basePolicyText is the text with the base policy: fixed words (device
// names, service names) a fuzzed path may happen to equal.
var basePolicyText = func() string {
	p, _ := Generate(basePolicy(), nil)
	return p.Text
}()
