package seatbelt

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
// setting, access rw/ro/none × network none/open × PTY
// (testdata/<setting>.sb; -update rewrites them).
func TestProfileGolden(t *testing.T) {
	for _, access := range []string{"rw", "ro", "none"} {
		for _, network := range []string{"none", "open"} {
			for _, pty := range []bool{false, true} {
				name := fmt.Sprintf("%s-net-%s", access, network)
				if pty {
					name += "-pty"
				}
				t.Run(name, func(t *testing.T) {
					pol := basePolicy()
					pol.Access, pol.Network, pol.PTY = access, network, pty
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
					golden := filepath.Join("testdata", name+".sb")
					if *update {
						if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
							t.Fatal(err)
						}
					}
					want, err := os.ReadFile(golden)
					if err != nil {
						t.Fatalf("%v (run with -update)", err)
					}
					if b.String() != string(want) {
						t.Errorf("profile changed:\n%s", b.String())
					}
				})
			}
		}
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
//   - ro and none workspaces have no write allow on the workspace.
func TestProfileProperties(t *testing.T) {
	odd := []string{"plain", "with space", `quo"te`, "paren)(", "new\nline", `back\slash`, "(allow default)", "semi;colon", "ünï"}
	n := 0
	for _, ws := range odd {
		for _, home := range []string{"/Users/" + ws, "/tmp/" + ws} {
			for _, access := range []string{"rw", "ro", "none"} {
				for _, network := range []string{"none", "open"} {
					n++
					pol := basePolicy()
					pol.Home = home
					pol.Workspace = home + "/work/" + ws
					pol.ConchHome = home + "/.conch"
					pol.ScopeHome = pol.ConchHome + "/sandboxes/s/home"
					pol.Protect = []string{".git/hooks", ws, "../" + ws}
					pol.Access, pol.Network = access, network
					checkProperties(t, pol)
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("only %d policies generated", n)
	}
}

func checkProperties(t *testing.T, pol Policy) {
	t.Helper()
	prof, err := Generate(pol, macCanon)
	if err != nil {
		t.Fatalf("%+v: %v", pol, err)
	}
	text := prof.Text
	for _, p := range []string{pol.Workspace, pol.Home, pol.ConchHome, pol.ScopeHome, pol.ScopeTmp} {
		if strings.Contains(text, p) {
			t.Errorf("%q appears in the profile text", p)
		}
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
	wsWrite := slices.IndexFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "(allow") && strings.Contains(l, "file-write*") && strings.Contains(l, `(param "WORKSPACE")`)
	})
	if pol.Access != "rw" {
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
		if d.Name != "GIT_DIR" || pol.GitAccess != "rw" {
			if !strings.Contains(lines[deny], "(subpath "+ref+")") {
				t.Errorf("%s: no subpath deny: %s", d.Name, lines[deny])
			}
		}
		if !strings.HasPrefix(d.Value, macCanon(pol.Workspace)+"/") {
			t.Errorf("%s=%q is outside the workspace", d.Name, d.Value)
		}
	}
}

// TestGenerateRefuses: unknown settings and relative paths are errors,
// never a profile.
func TestGenerateRefuses(t *testing.T) {
	for name, mut := range map[string]func(*Policy){
		"access":        func(p *Policy) { p.Access = "write" },
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

// FuzzGenerate: whatever the workspace path, it never reaches the text.
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
		if err != nil {
			t.Fatal(err)
		}
		clean := filepath.Clean(ws)
		if clean != "/" && strings.Contains(prof.Text, clean) && !strings.Contains(basePolicyText, clean) {
			t.Fatalf("workspace %q appears in the text", clean)
		}
	})
}

// basePolicyText is the text with the base policy: fixed words (device
// names, service names) a fuzzed path may happen to equal.
var basePolicyText = func() string {
	p, _ := Generate(basePolicy(), nil)
	return p.Text
}()
