// Package seatbelt generates the macOS Seatbelt (SBPL) profile of a conch
// sandbox and the sandbox-exec command line that applies it. It is pure:
// paths travel as -D parameters, never in the profile's text, and are
// canonicalised by a resolver the caller gives (/tmp is /private/tmp on
// macOS), so its output is tested on every OS. It is not a registered
// backend yet: nothing here has run under sandbox-exec, and the profile
// needs a Mac to be checked (the escape suite of the Linux backends).
package seatbelt

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// SandboxExec is the program that applies a profile and executes the
// command in place. By its absolute path: one found on PATH could be
// anyone's.
const SandboxExec = "/usr/bin/sandbox-exec"

// Policy is what a sandboxed command may do, in conch's sandbox settings'
// terms. Paths are absolute.
type Policy struct {
	// Workspace is the agent's workspace; Access is rw, ro or none.
	Workspace string
	Access    string
	// Protect are the protected paths, relative to Workspace
	// (sandbox.protectPaths): never writable, also when absent at the
	// start (a mkdir of one is a write on its literal path).
	Protect []string
	// GitAccess ro makes the workspace's .git read-only; rw leaves it
	// writable. .git itself can never be renamed or removed.
	GitAccess string
	// Network is none or open.
	Network string
	// Home and ConchHome are hidden (neither readable nor writable),
	// except where the workspace or the scope lies below them.
	Home, ConchHome string
	// ScopeHome and ScopeTmp are the sandbox's own home and temporary
	// directory: readable and writable.
	ScopeHome, ScopeTmp string
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

// Args is the sandbox-exec command line that runs argv under p.
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
// given back (the workspace, the scope), then the protected paths, which
// no earlier allow can reopen.
func Generate(pol Policy, canon func(string) string) (Profile, error) {
	if canon == nil {
		canon = func(p string) string { return p }
	}
	g := &gen{canon: canon}
	switch pol.Access {
	case "rw", "ro", "none":
	default:
		return Profile{}, fmt.Errorf("seatbelt: workspace access %q: want rw, ro or none", pol.Access)
	}
	switch pol.Network {
	case "none", "open":
	default:
		return Profile{}, fmt.Errorf("seatbelt: network %q: want none or open", pol.Network)
	}
	for _, p := range []string{pol.Workspace, pol.Home, pol.ConchHome, pol.ScopeHome, pol.ScopeTmp} {
		if p != "" && !path.IsAbs(p) {
			return Profile{}, fmt.Errorf("seatbelt: %q is not an absolute path", p)
		}
	}
	if pol.Workspace == "" {
		return Profile{}, fmt.Errorf("seatbelt: no workspace")
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
	var hidden []string
	for _, h := range []struct{ name, p string }{{"HOME", pol.Home}, {"CONCH_HOME", pol.ConchHome}} {
		if h.p != "" {
			hidden = append(hidden, fmt.Sprintf("(subpath %s)", g.param(h.name, h.p)))
		}
	}
	if len(hidden) > 0 {
		g.line("(deny file-read* file-write* " + strings.Join(hidden, " ") + ")")
	}
	ws := g.param("WORKSPACE", pol.Workspace)
	g.section("the workspace (" + pol.Access + ")")
	switch pol.Access {
	case "none":
		g.line(fmt.Sprintf("(deny file-read* file-write* (subpath %s))", ws))
	case "ro":
		g.line(fmt.Sprintf("(allow file-read* (subpath %s))", ws))
	case "rw":
		g.line(fmt.Sprintf("(allow file-read* file-write* (subpath %s))", ws))
	}
	if pol.Access != "none" {
		// Tools stat the workspace's parents (getcwd, git looking for
		// its top): their metadata only, each a literal.
		for i, dir := range ancestors(g.canon(pol.Workspace)) {
			g.line(fmt.Sprintf("(allow file-read-metadata (literal %s))", g.param(fmt.Sprintf("WORKSPACE_PARENT_%d", i), dir)))
		}
	}
	g.section("the sandbox's own home and temporary directory")
	for _, s := range []struct{ name, p string }{{"SCOPE_HOME", pol.ScopeHome}, {"SCOPE_TMP", pol.ScopeTmp}} {
		if s.p != "" {
			g.line(fmt.Sprintf("(allow file-read* file-write* (subpath %s))", g.param(s.name, s.p)))
		}
	}
	if pol.Access == "rw" {
		g.section("protected paths: never written, renamed or created (literal and subpath, so a first mkdir is denied too)")
		protect := append([]string(nil), pol.Protect...)
		sort.Strings(protect)
		for i, rel := range protect {
			clean := path.Clean("/" + rel)[1:]
			if clean == "" {
				continue
			}
			p := g.param(fmt.Sprintf("PROTECT_%d", i), path.Join(pol.Workspace, clean))
			g.line(fmt.Sprintf("(deny file-write* (literal %s) (subpath %s))", p, p))
		}
		git := g.param("GIT_DIR", path.Join(pol.Workspace, ".git"))
		if pol.GitAccess == "rw" {
			g.line(fmt.Sprintf("(deny file-write* (literal %s))", git))
		} else {
			g.line(fmt.Sprintf("(deny file-write* (literal %s) (subpath %s))", git, git))
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
		g.section("the pseudo-terminal (opened before the sandbox: no PTY extension, so by device name)")
		g.line("(allow pseudo-tty)")
		g.line(`(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))`)
		g.line(`(allow file-read* file-write* file-ioctl (regex #"^/dev/ttys[0-9]+$"))`)
	}
	return Profile{Text: g.b.String(), Params: g.params}, nil
}

// ancestors lists the directories above p, "/" excluded, nearest last.
func ancestors(p string) []string {
	var out []string
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
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
