// Package seatbelt is the macOS sandbox backend: it generates the
// Seatbelt (SBPL) profile of a conch sandbox and runs the command under
// /usr/bin/sandbox-exec, which applies the profile and executes the shell
// in place (so the supervisor owns the command's pid, as with bwrap).
//
// Everything here but the registration (register_darwin.go) is portable
// and tested on every OS: the profile generator is pure (paths travel as
// -D parameters, never in the profile's text, canonicalised by a
// resolver the caller gives: /tmp is /private/tmp on macOS), and the
// backend's command line is built from a Run the way bwrap's is. Not yet
// run on macOS: whether sandbox-exec accepts these profiles and denies
// what they deny needs a Mac (the escape suite of the Linux backends).
package seatbelt

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SandboxExec is the program that applies a profile and executes the
// command in place. By its absolute path: one found on PATH could be
// anyone's.
const SandboxExec = "/usr/bin/sandbox-exec"

// Policy is what a sandboxed command may do, in conch's sandbox settings'
// terms. Paths are absolute.
type Policy struct {
	// Workspace is the directory the command works in; Access is rw or
	// ro. (sandbox.workspaceAccess none runs in the sandbox's private
	// workspace, rw, with the agent's own workspace in Hidden.)
	Workspace string
	Access    string
	// Protect are paths relative to Workspace that are never writable,
	// also when absent at the start (a mkdir of one is a write on its
	// literal path): sandbox.protectPaths and the repositories' git
	// files. The directories between Workspace and each cannot be
	// renamed or removed. Only a rw workspace has them.
	Protect []string
	// GitAccess ro makes the workspace's .git read-only; rw leaves it
	// writable. .git itself can never be renamed or removed.
	GitAccess string
	// Network is none or open.
	Network string
	// Home and ConchHome are hidden (neither readable nor writable),
	// except where the workspace or the scope lies below them; so is
	// each of Hidden.
	Home, ConchHome string
	Hidden          []string
	// ScopeHome and ScopeTmp are the sandbox's own home and temporary
	// directory: readable and writable.
	ScopeHome, ScopeTmp string
	// Read and Write are further directories given back read-only and
	// read-write (sandbox binds: Seatbelt cannot move a directory, so a
	// bind's destination is its source).
	Read, Write []string
	// PTY allows the pseudo-terminal devices.
	PTY bool
}

// Param is one -D parameter of sandbox-exec.
type Param struct{ Name, Value string }

// Profile is a generated profile: the SBPL text and its parameters.
type Profile struct {
	Text   string
	Params []Param
}

// Args is the sandbox-exec command line that runs argv under p:
// sandbox-exec -p TEXT -D NAME=VALUE … -- argv.
func (p Profile) Args(argv ...string) []string {
	args := []string{SandboxExec, "-p", p.Text}
	for _, d := range p.Params {
		args = append(args, "-D", d.Name+"="+d.Value)
	}
	return append(append(args, "--"), argv...)
}

// Generate builds the profile of pol. canon canonicalises an absolute
// path as the kernel reports it (symlinks resolved: /tmp →
// /private/tmp, /var → /private/var); nil keeps paths as given. It fails
// on a relative path or an unknown setting.
//
// The rules are ordered for Seatbelt's last-match-wins: broad allows
// first (read the system), then the hidden directories, then what is
// given back (the workspace, the scope, binds), then the protected
// paths, which no earlier allow can reopen.
func Generate(pol Policy, canon func(string) string) (Profile, error) {
	if canon == nil {
		canon = func(p string) string { return p }
	}
	g := &gen{canon: canon}
	switch pol.Access {
	case "rw", "ro":
	default:
		return Profile{}, fmt.Errorf("seatbelt: workspace access %q: want rw or ro", pol.Access)
	}
	switch pol.Network {
	case "none", "open":
	default:
		return Profile{}, fmt.Errorf("seatbelt: network %q: want none or open", pol.Network)
	}
	if pol.Workspace == "" {
		return Profile{}, fmt.Errorf("seatbelt: no workspace")
	}
	all := append([]string{pol.Workspace, pol.Home, pol.ConchHome, pol.ScopeHome, pol.ScopeTmp}, pol.Hidden...)
	for _, p := range append(append(all, pol.Read...), pol.Write...) {
		if p != "" && !path.IsAbs(p) {
			return Profile{}, fmt.Errorf("seatbelt: %q is not an absolute path", p)
		}
	}
	g.line("(version 1)")
	g.line("(deny default)")
	g.section("processes: fork and exec; signals and process information only within the sandbox")
	g.line("(allow process-fork)")
	g.line("(allow process-exec)")
	g.line("(allow signal (target same-sandbox))")
	g.line("(allow process-info* (target same-sandbox))")
	g.line("(allow sysctl-read)")
	g.line("(allow ipc-posix-sem)")
	g.section("user and group lookups (getpwuid); no other service: launchd, LaunchServices and Apple events stay out of reach")
	g.line(`(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))`)
	g.section("the system is readable; the hidden directories below are not")
	g.line("(allow file-read*)")
	g.line(`(allow file-write-data (require-all (literal "/dev/null") (vnode-type CHARACTER-DEVICE)))`)
	g.line(`(allow file-read* file-write* file-ioctl (literal "/dev/tty"))`)
	// /dev/fd/N (and /dev/stdout, a link to it) duplicates a descriptor
	// the command already has: no new access.
	g.line(`(allow file-read-data file-write-data (regex #"^/dev/fd/[0-9]+$"))`)
	var hidden []string
	for _, h := range []struct{ name, p string }{{"HOME", pol.Home}, {"CONCH_HOME", pol.ConchHome}} {
		if h.p != "" {
			hidden = append(hidden, fmt.Sprintf("(subpath %s)", g.param(h.name, h.p)))
		}
	}
	for i, h := range pol.Hidden {
		hidden = append(hidden, fmt.Sprintf("(subpath %s)", g.param(fmt.Sprintf("HIDDEN_%d", i), h)))
	}
	if len(hidden) > 0 {
		g.line("(deny file-read* file-write* " + strings.Join(hidden, " ") + ")")
	}
	ws := g.param("WORKSPACE", pol.Workspace)
	g.section("the workspace (" + pol.Access + ")")
	if pol.Access == "ro" {
		g.line(fmt.Sprintf("(allow file-read* (subpath %s))", ws))
	} else {
		g.line(fmt.Sprintf("(allow file-read* file-write* (subpath %s))", ws))
	}
	g.section("the sandbox's own home and temporary directory")
	for _, s := range []struct{ name, p string }{{"SCOPE_HOME", pol.ScopeHome}, {"SCOPE_TMP", pol.ScopeTmp}} {
		if s.p != "" {
			g.line(fmt.Sprintf("(allow file-read* file-write* (subpath %s))", g.param(s.name, s.p)))
		}
	}
	if len(pol.Read)+len(pol.Write) > 0 {
		g.section("binds")
		for i, p := range pol.Read {
			g.line(fmt.Sprintf("(allow file-read* (subpath %s))", g.param(fmt.Sprintf("READ_%d", i), p)))
		}
		for i, p := range pol.Write {
			g.line(fmt.Sprintf("(allow file-read* file-write* (subpath %s))", g.param(fmt.Sprintf("WRITE_%d", i), p)))
		}
	}
	// Tools stat the parents of where they work (getcwd, realpath, git
	// looking for its top): those in a hidden directory get their
	// metadata back, each a literal.
	var given, hid []string
	for _, p := range append([]string{pol.Workspace, pol.ScopeHome, pol.ScopeTmp}, append(pol.Read, pol.Write...)...) {
		if p != "" {
			given = append(given, g.canon(path.Clean(p)))
		}
	}
	for _, p := range append([]string{pol.Home, pol.ConchHome}, pol.Hidden...) {
		if p != "" {
			hid = append(hid, g.canon(path.Clean(p)))
		}
	}
	n := 0
	for _, dir := range ancestors(given) {
		if !below(dir, hid) {
			continue
		}
		if n == 0 {
			g.section("the parents of the directories given back, in a hidden one: metadata only")
		}
		g.line(fmt.Sprintf("(allow file-read-metadata (literal %s))", g.param(fmt.Sprintf("PARENT_%d", n), dir)))
		n++
	}
	if pol.Access == "rw" {
		g.section("protected paths: never written, renamed or created (literal and subpath, so a first mkdir is denied too)")
		protect := cleanRel(pol.Protect)
		for i, rel := range protect {
			p := g.param(fmt.Sprintf("PROTECT_%d", i), path.Join(pol.Workspace, rel))
			g.line(fmt.Sprintf("(deny file-write* (literal %s) (subpath %s))", p, p))
		}
		git := g.param("GIT_DIR", path.Join(pol.Workspace, ".git"))
		if pol.GitAccess == "rw" {
			g.line(fmt.Sprintf("(deny file-write* (literal %s))", git))
		} else {
			g.line(fmt.Sprintf("(deny file-write* (literal %s) (subpath %s))", git, git))
		}
		// A directory above a protected path could be renamed away and
		// made again: each is denied as a literal (its entries stay
		// writable).
		for i, dir := range between(protect) {
			g.line(fmt.Sprintf("(deny file-write* (literal %s))", g.param(fmt.Sprintf("PROTECT_PARENT_%d", i), path.Join(pol.Workspace, dir))))
		}
		// Seatbelt matches the path the kernel reports, with each name
		// as stored. On a case-insensitive volume (APFS's default) a
		// .GIT or .Conch made by the command is what git and conch open
		// for .git and .conch, yet no rule above names it. So each
		// protected path is denied again by a regex that matches it in
		// any letter case, anchored at the workspace (itself in any case:
		// a configured path may differ from the stored one): the one
		// place where a path is text of the profile (regexFold).
		g.section("the same, in any letter case (case-insensitive volumes)")
		if strings.ContainsFunc(pol.Workspace, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return Profile{}, fmt.Errorf("%w: %q", ErrControlChar, pol.Workspace)
		}
		fold := func(rel, tail string) {
			g.line(fmt.Sprintf(`(deny file-write* (regex #"^%s%s"))`, regexFold(path.Join(g.canon(path.Clean(pol.Workspace)), rel)), tail))
		}
		for _, rel := range protect {
			fold(rel, "(/.*)?$")
		}
		if pol.GitAccess == "rw" {
			fold(".git", "$")
		} else {
			fold(".git", "(/.*)?$")
		}
		for _, dir := range between(protect) {
			fold(dir, "$")
		}
	}
	g.section("network (" + pol.Network + ")")
	if pol.Network == "open" {
		g.line("(allow network*)")
		g.line(`(allow mach-lookup (global-name "com.apple.trustd.agent") (global-name "com.apple.mDNSResponder"))`)
	} else {
		g.line("; no network rule: no IP, and no connect to any unix socket (the engine's among them)")
	}
	if pol.PTY {
		g.section("the pseudo-terminal: openpty inside; the session's terminal, opened before the sandbox, by its descriptors only (ioctl)")
		g.line("(allow pseudo-tty)")
		g.line(`(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))`)
		g.line(`(allow file-read* file-write* (require-all (regex #"^/dev/ttys[0-9]+$") (extension "com.apple.sandbox.pty")))`)
		g.line(`(allow file-ioctl (regex #"^/dev/ttys[0-9]+$"))`)
	}
	return Profile{Text: g.b.String(), Params: g.params}, nil
}

// ErrControlChar is the error of a writable workspace whose path has a
// control character: the regexes that protect its paths cannot be sure
// to match it (a regex's . may not match a newline).
var ErrControlChar = errors.New("seatbelt: the workspace path has a control character")

// regexFold is the path p as a regex for a #"…" literal of SBPL that
// matches it in any letter case: [gG] for g, (ü|Ü) for ü, the
// metacharacters of POSIX extended regexes escaped. A double quote or a
// byte that is not UTF-8 becomes ., which matches it too (the denial
// only grows), so nothing in p can end the literal; p has no control
// character (Generate refuses one).
// Letters that fold to more than one letter (ß) and Unicode
// normalization (APFS also equates é and e + ◌́) are not covered.
func regexFold(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		i += size
		lo, up := unicode.ToLower(r), unicode.ToUpper(r)
		switch {
		case r == utf8.RuneError && size == 1, r == '"', r < 0x20, r == 0x7f:
			// (r < 0x20 and 0x7f only from a protected path's name;
			// Generate refuses them in the workspace)
			b.WriteByte('.')
		case r < 0x80 && lo != up:
			b.WriteString("[" + string(lo) + string(up) + "]")
		case lo != up:
			// Not a bracket: a regex that reads bytes would take each
			// byte of a multi-byte letter as a member.
			b.WriteString("(" + string(lo) + "|" + string(up) + ")")
		case strings.ContainsRune(`\.^$|?*+()[]{}`, r):
			b.WriteString("\\" + string(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cleanRel cleans workspace-relative paths (a ../ never leaves the
// workspace), drops the workspace itself and duplicates, and sorts them.
func cleanRel(rels []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, rel := range rels {
		clean := path.Clean("/" + rel)[1:]
		if clean != "" && !seen[clean] {
			seen[clean] = true
			out = append(out, clean)
		}
	}
	sort.Strings(out)
	return out
}

// between lists the directories strictly between the workspace and each
// of rels (workspace-relative), sorted, .git excluded (it has its own
// rule).
func between(rels []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, rel := range rels {
		for d := path.Dir(rel); d != "." && d != "/"; d = path.Dir(d) {
			if d != ".git" && !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	sort.Strings(out)
	return out
}

// below reports whether p is one of dirs or lies below one.
func below(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// ancestors lists the directories above each of ps, "/" excluded,
// without duplicates, shallowest first.
func ancestors(ps []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range ps {
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := strings.Count(out[i], "/"), strings.Count(out[j], "/"); a != b {
			return a < b
		}
		return out[i] < out[j]
	})
	return out
}

type gen struct {
	canon  func(string) string
	b      strings.Builder
	params []Param
}

func (g *gen) line(s string) { g.b.WriteString(s + "\n") }

func (g *gen) section(s string) { g.b.WriteString("\n; " + s + "\n") }

// param defines NAME as the canonical form of p and returns its SBPL
// reference. Names are fixed words of this package, never user text.
func (g *gen) param(name, p string) string {
	g.params = append(g.params, Param{Name: name, Value: g.canon(path.Clean(p))})
	return fmt.Sprintf("(param %q)", name)
}
