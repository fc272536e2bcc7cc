package policy

import (
	"sort"
	"strings"
)

// flagKind is the kind of a profile flag.
type flagKind int

const (
	flagUnknown flagKind = iota
	flagValue
	flagBool
	flagDenied
	flagAmbiguous
)

// compiledProfile is a Profile ready for validation.
type compiledProfile struct {
	name     string
	min, max int
	flags    map[string]flagKind // "-n", "--lines" → kind
	longs    []string            // every long flag, sorted
}

func compileProfiles(m map[string]Profile) map[string]*compiledProfile {
	out := make(map[string]*compiledProfile, len(m))
	for name, p := range m {
		out[name] = compileProfile(name, p)
	}
	return out
}

func compileProfile(name string, p Profile) *compiledProfile {
	c := &compiledProfile{name: name, min: p.MinPositional, max: p.MaxPositional, flags: map[string]flagKind{}}
	if c.min < 0 {
		c.min = 0
	}
	if c.max < c.min {
		c.max = c.min
	}
	add := func(list []string, k flagKind) {
		for _, f := range list {
			f = strings.TrimSpace(f)
			if len(f) < 2 || f[0] != '-' || f == "--" {
				continue
			}
			if old, ok := c.flags[f]; ok && old == flagDenied {
				continue // denied wins over an allowed duplicate
			}
			c.flags[f] = k
		}
	}
	add(p.AllowedValueFlags, flagValue)
	add(p.AllowedBoolFlags, flagBool)
	add(p.DeniedFlags, flagDenied)
	for f := range c.flags {
		if strings.HasPrefix(f, "--") {
			c.longs = append(c.longs, f)
		}
	}
	sort.Strings(c.longs)
	return c
}

// long resolves a long option name by exact match or unique prefix.
func (c *compiledProfile) long(name string) (string, flagKind) {
	if k, ok := c.flags[name]; ok {
		return name, k
	}
	if len(name) <= 2 {
		return name, flagUnknown
	}
	found := ""
	for _, f := range c.longs {
		if strings.HasPrefix(f, name) {
			if found != "" {
				return name, flagAmbiguous
			}
			found = f
		}
	}
	if found == "" {
		return name, flagUnknown
	}
	return found, c.flags[found]
}

// usedFlag records a flag that passed, for the explain rule.
type usedFlag struct {
	name  string
	value bool
}

// check validates the arguments after the executable (policy.md §7). It
// returns the flags used, or a rejection reason.
func (c *compiledProfile) check(args []string) ([]usedFlag, string) {
	var used []usedFlag
	positional := 0
	endOpts := false
	for i := 0; i < len(args); i++ {
		t := args[i]
		switch {
		case t == "" || t == "-":
			continue
		case endOpts:
		case t == "--":
			endOpts = true
			continue
		case strings.HasPrefix(t, "--"):
			name, val, hasVal := strings.Cut(t, "=")
			full, k := c.long(name)
			switch k {
			case flagUnknown:
				return nil, "unknown flag " + name
			case flagAmbiguous:
				return nil, "ambiguous flag " + name
			case flagDenied:
				return nil, "denied flag " + full
			case flagBool:
				if hasVal {
					return nil, "flag " + full + " takes no value"
				}
				used = append(used, usedFlag{full, false})
			case flagValue:
				if !hasVal {
					if i+1 >= len(args) {
						return nil, "flag " + full + " needs a value"
					}
					i++
					val = args[i]
				}
				if !safeLiteral(val) {
					return nil, "unsafe value for " + full
				}
				used = append(used, usedFlag{full, true})
			}
			continue
		case strings.HasPrefix(t, "-"):
			if (c.name == "head" || c.name == "tail") && allDigits(t[1:]) {
				used = append(used, usedFlag{t, false})
				continue
			}
			cluster := t[1:]
			for j := 0; j < len(cluster); j++ {
				f := "-" + cluster[j:j+1]
				switch c.flags[f] {
				case flagDenied:
					return nil, "denied flag " + f
				case flagBool:
					used = append(used, usedFlag{f, false})
					continue
				case flagValue:
					val := cluster[j+1:]
					if val == "" {
						if i+1 >= len(args) {
							return nil, "flag " + f + " needs a value"
						}
						i++
						val = args[i]
					}
					if !safeLiteral(val) {
						return nil, "unsafe value for " + f
					}
					used = append(used, usedFlag{f, true})
					j = len(cluster)
					continue
				}
				return nil, "unknown flag " + f
			}
			continue
		}
		positional++
		if !safeLiteral(t) {
			return nil, "unsafe positional argument"
		}
		if c.name == "jq" && jqFilterDenied(t) {
			return nil, "jq filter uses a denied builtin"
		}
	}
	if positional < c.min || positional > c.max {
		return nil, "positional arguments out of range"
	}
	return used, ""
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// safeLiteral: no glob characters, NUL or newline, and not path-like.
func safeLiteral(v string) bool {
	if strings.ContainsAny(v, "*?[]\x00\n") {
		return false
	}
	if strings.HasPrefix(v, "/") || strings.HasPrefix(v, "./") || strings.HasPrefix(v, "../") || strings.HasPrefix(v, "~") {
		return false
	}
	if len(v) >= 3 && v[1] == ':' && (v[2] == '\\' || v[2] == '/') &&
		(v[0] >= 'a' && v[0] <= 'z' || v[0] >= 'A' && v[0] <= 'Z') {
		return false
	}
	return true
}

func jqFilterDenied(filter string) bool {
	f := strings.ToLower(filter)
	for _, w := range jqDeniedFilterWords {
		if strings.Contains(f, strings.ToLower(w)) {
			return true
		}
	}
	return false
}

// describe renders the flags used for the explain rule:
// "value flag -n", "bool flags -l, -w".
func describeFlags(used []usedFlag) string {
	var vals, bools []string
	for _, u := range used {
		if u.value {
			vals = append(vals, u.name)
		} else {
			bools = append(bools, u.name)
		}
	}
	var parts []string
	group := func(kind string, list []string) {
		if len(list) == 0 {
			return
		}
		s := kind + " flag"
		if len(list) > 1 {
			s += "s"
		}
		parts = append(parts, s+" "+strings.Join(list, ", "))
	}
	group("value", vals)
	group("bool", bools)
	return strings.Join(parts, "; ")
}

// CheckProfile validates args (the words after the executable, literal) of
// the safe bin name against profile p, as Evaluate does. It returns "" when
// they pass, else the reason. It is exported for `conch doctor` and tests.
func CheckProfile(name string, p Profile, args []string) string {
	_, reason := compileProfile(name, p).check(args)
	return reason
}

// UnprofiledSafeBins returns the safe-bin entries that have neither a
// custom nor a built-in profile: Evaluate ignores them (policy.md §7), and
// `conch doctor` reports them. safeBins nil means [DefaultSafeBins].
func UnprofiledSafeBins(safeBins []string, profiles map[string]Profile) []string {
	if safeBins == nil {
		safeBins = DefaultSafeBins
	}
	var out []string
	seen := map[string]bool{}
	for _, b := range safeBins {
		b = strings.ToLower(strings.TrimSpace(b))
		if b == "" || seen[b] {
			continue
		}
		seen[b] = true
		if _, ok := profiles[b]; ok {
			continue
		}
		if _, ok := builtinProfs[b]; !ok {
			out = append(out, b)
		}
	}
	return out
}
