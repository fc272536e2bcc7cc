// Package shellenv decides which environment variables a command on a real
// host may inherit or be given: dangerous keys and prefixes are removed from
// the inherited environment and rejected in a request, override-only ones
// are kept but rejected in a request, and PATH is never given. The lists are
// data (shellenv.json, embedded and versioned), matched case-insensitively.
package shellenv

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

//go:embed shellenv.json
var listsJSON []byte

type lists struct {
	Version              int      `json:"version"`
	DangerousKeys        []string `json:"dangerousKeys"`
	DangerousPrefixes    []string `json:"dangerousPrefixes"`
	OverrideOnlyKeys     []string `json:"overrideOnlyKeys"`
	OverrideOnlyPrefixes []string `json:"overrideOnlyPrefixes"`
	PathValueKeys        []string `json:"pathValueKeys"`
	PathValuePrefixes    []string `json:"pathValuePrefixes"`
}

var data = func() lists {
	var l lists
	if err := json.Unmarshal(listsJSON, &l); err != nil {
		panic("hostenv.json: " + err.Error())
	}
	return l
}()

func has(list []string, key string) bool {
	for _, k := range list {
		if strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

func hasPrefix(list []string, key string) bool {
	u := strings.ToUpper(key)
	for _, p := range list {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

// Dangerous reports whether key must not be inherited by a host command.
func Dangerous(key string) bool {
	return has(data.DangerousKeys, key) || hasPrefix(data.DangerousPrefixes, key)
}

// Blocked reports whether a request may not set key on a host run.
func Blocked(key string) bool {
	return Dangerous(key) || has(data.OverrideOnlyKeys, key) || hasPrefix(data.OverrideOnlyPrefixes, key)
}

// PathValue reports whether a request may not give key the value v: the C
// library opens a file named by the value of TZ and of the locale
// variables (TZ=/etc/shadow; LANGUAGE=../../../tmp/x makes every GNU tool
// load tmp/x/LC_MESSAGES/<tool>.mo, whose translations are its printf
// formats). A value is refused when one of its ":"-separated elements is
// absolute or has a ".." component; "UTC", "Europe/Paris", "fr:en" and
// "C.UTF-8" pass.
func PathValue(key, v string) bool {
	if !has(data.PathValueKeys, key) && !hasPrefix(data.PathValuePrefixes, key) {
		return false
	}
	for _, el := range strings.Split(v, ":") {
		if strings.HasPrefix(el, "/") || strings.HasPrefix(el, `\`) {
			return true
		}
		for _, c := range strings.FieldsFunc(el, func(r rune) bool { return r == '/' || r == '\\' }) {
			if c == ".." {
				return true
			}
		}
	}
	return false
}

var portable = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Inherit filters a daemon environment ("K=V" entries) for host commands:
// dangerous keys and prefixes go, and so does every conch variable
// (CONCH_*), which may carry tokens.
func Inherit(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || Dangerous(k) || strings.HasPrefix(strings.ToUpper(k), "CONCH_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Validate checks a request's env overrides for a host run and returns the
// spec's "Security Violation" text, or "" when all are allowed.
func Validate(env map[string]string) string {
	var bad, blocked, paths []string
	for k, v := range env {
		switch {
		case strings.EqualFold(k, "PATH"):
			return "Security Violation: Custom 'PATH' variable is forbidden during host execution."
		case !portable.MatchString(k):
			bad = append(bad, k)
		case Blocked(k):
			blocked = append(blocked, k)
		case PathValue(k, v):
			paths = append(paths, k)
		}
	}
	sort.Strings(bad)
	sort.Strings(blocked)
	sort.Strings(paths)
	switch {
	case len(bad) > 0:
		return fmt.Sprintf("Security Violation: invalid non-portable override keys: %s.", strings.Join(bad, ", "))
	case len(blocked) == 1:
		return fmt.Sprintf("Security Violation: Environment variable '%s' is forbidden during host execution.", blocked[0])
	case len(blocked) > 1:
		q := make([]string, len(blocked))
		for i, b := range blocked {
			q[i] = "'" + b + "'"
		}
		return fmt.Sprintf("Security Violation: Environment variables %s are forbidden during host execution.", strings.Join(q, ", "))
	case len(paths) > 0:
		return fmt.Sprintf("Security Violation: Environment variable '%s' names a file path (absolute or with '..'), forbidden during host execution.", paths[0])
	}
	return ""
}
