package host

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/conchsh/conch/internal/host/shellenv"
)

// EnvSpec describes the environment of one command. Build applies, in
// order: Base, each of Layers (later ones win), LoginPATH merged in front
// of PATH, PathPrepend in front of that, the markers CONCH_SHELL and
// OPENCLAW_SHELL, and TERM for a PTY.
type EnvSpec struct {
	// Base is the starting environment.
	Base map[string]string
	// Layers override Base in order: the non-interactive defaults,
	// sandbox.env, the request's overrides.
	Layers []map[string]string
	// LoginPATH, if set, is merged in front of PATH (gateway runs).
	LoginPATH string
	// PathPrepend are entries put in front of PATH (~ expanded).
	PathPrepend []string
	// PTY sets TERM: Term if set, else the daemon's $TERM, else
	// xterm-256color.
	PTY  bool
	Term string
}

// InheritedBase is the daemon's own environment with what a command must
// not inherit removed (shellenv.Inherit), and its PATH raised to the
// minimal PATH of the OS (shellenv.DaemonPATH).
func InheritedBase() map[string]string {
	env := map[string]string{}
	for _, kv := range shellenv.Inherit(os.Environ()) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	env["PATH"] = shellenv.DaemonPATH()
	return env
}

// Build returns the environment as sorted KEY=VALUE strings, with this
// system's rules (envRules).
func (s EnvSpec) Build() []string { return s.build(hostEnvRules) }

// envRules are how a system's environment works: whether its keys fold
// case (Windows: "Path" and "PATH" are one variable) and what separates
// the entries of PATH.
type envRules struct {
	fold    bool
	listSep string
}

var (
	unixEnvRules    = envRules{listSep: ":"}
	windowsEnvRules = envRules{fold: true, listSep: ";"}
)

// build is Build under the rules r. Where keys fold case, a variable
// keeps the spelling it first had (Base's "Path") and takes the value
// set last in any spelling.
func (s EnvSpec) build(r envRules) []string {
	env := make(map[string]string, len(s.Base)+8)
	spelling := map[string]string{} // upper-cased key → the key in env, when r.fold
	key := func(k string) string {
		if !r.fold {
			return k
		}
		u := strings.ToUpper(k)
		if have, ok := spelling[u]; ok {
			return have
		}
		spelling[u] = k
		return k
	}
	set := func(k, v string) { env[key(k)] = v }
	get := func(k string) string { return env[key(k)] }
	// Base in a fixed order: of two spellings of one key, the first in
	// sort order is kept.
	for _, k := range SortedKeys(s.Base) {
		set(k, s.Base[k])
	}
	for _, l := range s.Layers {
		for _, k := range SortedKeys(l) {
			set(k, l[k])
		}
	}
	if s.LoginPATH != "" {
		set("PATH", shellenv.MergePATHList(s.LoginPATH, get("PATH"), r.listSep))
	}
	if len(s.PathPrepend) > 0 {
		set("PATH", prependPathList(s.PathPrepend, get("PATH"), r.listSep))
	}
	set("CONCH_SHELL", "exec")
	set("OPENCLAW_SHELL", "exec")
	if s.PTY {
		switch t := os.Getenv("TERM"); {
		case s.Term != "":
			set("TERM", s.Term)
		case t != "":
			set("TERM", t)
		default:
			set("TERM", "xterm-256color")
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// PrependPath puts entries (trimmed, de-duplicated, ~ and ~/ expanded) in
// front of path.
func PrependPath(entries []string, path string) string {
	return prependPathList(entries, path, string(os.PathListSeparator))
}

// prependPathList is PrependPath for a PATH whose entries sep separates.
func prependPathList(entries []string, path, sep string) string {
	seen := map[string]bool{}
	var out []string
	for _, p := range entries {
		p, _ = ExpandTilde(strings.TrimSpace(p))
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range strings.Split(path, sep) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// ExpandTilde expands a leading "~", "~/" or, on Windows, "~\" to the
// home directory of the user conch runs as; expanded reports whether it did. "~user" is not
// expanded, nor is anything when the home is unknown.
func ExpandTilde(p string) (string, bool) {
	if p != "~" && !strings.HasPrefix(p, "~/") && !strings.HasPrefix(p, "~"+string(filepath.Separator)) {
		return p, false
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return p, false
	}
	return filepath.Join(home, p[1:]), true
}

// EnvHash hashes a request's env overrides (recorded with approvals and
// in the ledger; compared by a node before a run).
func EnvHash(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\x00", k, env[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SortedKeys returns the keys of m, sorted (nil for an empty map).
func SortedKeys(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
