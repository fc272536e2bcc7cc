package policy

import "strings"

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
	flags    map[string]flagKind // "-n", "--lines" → kind, as the profile lists them
	table    *compiledTable      // the tool's command line
}

// compiledTable is an OptionTable ready for parsing.
type compiledTable struct {
	grammar       Grammar
	short         map[byte]*Option
	longs         []*Option           // table order, for abbreviations
	names         map[string][]string // identity → every name of the option
	obsoleteCount bool
}

func compileTable(t OptionTable) *compiledTable {
	c := &compiledTable{grammar: t.Grammar, short: map[byte]*Option{}, names: map[string][]string{}, obsoleteCount: t.ObsoleteCount}
	add := func(o *Option) {
		if o.Short != "" {
			if _, dup := c.short[o.Short[0]]; !dup {
				c.short[o.Short[0]] = o
			}
		}
		if o.Long != "" {
			c.longs = append(c.longs, o)
		}
		id := identity(o)
		for _, n := range optionNames(o) {
			c.names[id] = append(c.names[id], n)
		}
	}
	for i := range t.Options {
		o := t.Options[i]
		add(&o)
	}
	if t.DigitOptions {
		for d := byte('0'); d <= '9'; d++ {
			add(&Option{Short: string(d)})
		}
	}
	return c
}

// identity groups the names of one option: a short name and every long
// spelling getopt maps to the same option.
func identity(o *Option) string {
	switch {
	case o.Alias != "":
		return "--" + o.Alias
	case o.Short != "":
		return "-" + o.Short
	}
	return "--" + o.Long
}

func optionNames(o *Option) []string {
	var out []string
	if o.Short != "" {
		out = append(out, "-"+o.Short)
	}
	if o.Long != "" {
		out = append(out, "--"+o.Long)
	}
	return out
}

// tableFromProfile is the command line assumed for a tool without a
// built-in option table: the profile's own flags, value flags taking a
// required argument.
func tableFromProfile(p Profile) OptionTable {
	var t OptionTable
	add := func(list []string, arg ArgKind) {
		for _, f := range list {
			f = strings.TrimSpace(f)
			switch {
			case len(f) < 2 || f[0] != '-' || f == "--":
			case strings.HasPrefix(f, "--"):
				t.Options = append(t.Options, Option{Long: f[2:], Arg: arg})
			case len(f) == 2:
				t.Options = append(t.Options, Option{Short: f[1:], Arg: arg})
			}
		}
	}
	add(p.DeniedFlags, NoArg)
	add(p.AllowedValueFlags, RequiredArg)
	add(p.AllowedBoolFlags, NoArg)
	return t
}

// compiled option tables of the built-in tools.
var builtinTables = func() map[string]*compiledTable {
	out := make(map[string]*compiledTable, len(OptionTables))
	for name, t := range OptionTables {
		out[name] = compileTable(t)
	}
	return out
}()

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
	if t, ok := builtinTables[name]; ok {
		c.table = t
	} else {
		c.table = compileTable(tableFromProfile(p))
	}
	return c
}

// long resolves a long option name (without "--") the way getopt_long
// does: an exact match, else a unique prefix, where prefixes of several
// spellings of one option are not ambiguous. jq takes exact names only.
func (t *compiledTable) long(name string) (*Option, string) {
	for _, o := range t.longs {
		if o.Long == name {
			return o, ""
		}
	}
	if t.grammar == JQ {
		return nil, "unknown flag --" + name
	}
	var found *Option
	for _, o := range t.longs {
		if !strings.HasPrefix(o.Long, name) {
			continue
		}
		if found == nil {
			found = o
		} else if identity(found) != identity(o) || found.Arg != o.Arg {
			return nil, "ambiguous flag --" + name
		}
	}
	if found == nil {
		return nil, "unknown flag --" + name
	}
	return found, ""
}

// judge decides whether the profile allows option o used under name;
// attached says a value was attached (`--group=x`, `-xARG` of an
// optional-argument option).
func (c *compiledProfile) judge(o *Option, name string, attached bool) string {
	for _, n := range c.table.names[identity(o)] {
		if c.flags[n] == flagDenied {
			return "denied flag " + n
		}
	}
	switch c.flags[name] {
	case flagUnknown:
		return "unknown flag " + name
	case flagBool:
		if attached || o.Arg == RequiredArg {
			return "flag " + name + " takes no value"
		}
	}
	return ""
}

// usedFlag records a flag that passed, for the explain rule.
type usedFlag struct {
	name  string
	value bool
}

// check validates the arguments after the executable: it
// parses them as the tool's own parser does, with the tool's complete
// option table, and judges every option found by the profile. It returns
// the flags used, or a rejection reason.
func (c *compiledProfile) check(args []string) ([]usedFlag, string) {
	var used []usedFlag
	var operands []string
	t := c.table
	// value takes the argument of a required-argument option: the rest of
	// the word, else the next word, whatever it is.
	value := func(i *int, rest, name string, words int) string {
		if words == 0 {
			words = 1
		}
		if rest != "" {
			words--
			if !safeLiteral(rest) {
				return "unsafe value for " + name
			}
		}
		for ; words > 0; words-- {
			if *i+1 >= len(args) {
				return "flag " + name + " needs a value"
			}
			*i++
			if !safeLiteral(args[*i]) {
				return "unsafe value for " + name
			}
		}
		return ""
	}
	endOpts := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if endOpts || !isOption(t.grammar, a) {
			operands = append(operands, a)
			continue
		}
		if a == "--" {
			endOpts = true
			continue
		}
		if strings.HasPrefix(a, "--") {
			name, val, attached := a[2:], "", false
			if t.grammar == GetoptLong {
				name, val, attached = strings.Cut(name, "=")
			}
			o, why := t.long(name)
			if why != "" {
				return nil, why
			}
			full := "--" + o.Long
			if why := c.judge(o, full, attached && o.Arg == OptionalArg); why != "" {
				return nil, why
			}
			switch {
			case o.Arg == NoArg && attached:
				return nil, "flag " + full + " takes no value"
			case o.Arg == RequiredArg && !attached:
				if why := value(&i, "", full, o.Words); why != "" {
					return nil, why
				}
			case attached && !safeLiteral(val):
				return nil, "unsafe value for " + full
			}
			used = append(used, usedFlag{full, o.Arg == RequiredArg || attached})
			continue
		}
		if i == 0 && t.obsoleteCount {
			if allDigits(a[1:]) {
				used = append(used, usedFlag{a, false})
				continue
			}
			if obsoleteTail(a[1:]) {
				return nil, "obsolete option form " + a
			}
		}
		for j := 1; j < len(a); j++ {
			o := t.short[a[j]]
			f := "-" + a[j:j+1]
			if o == nil {
				return nil, "unknown flag " + f
			}
			rest := a[j+1:]
			if why := c.judge(o, f, o.Arg == OptionalArg && rest != ""); why != "" {
				return nil, why
			}
			if o.Arg == NoArg {
				used = append(used, usedFlag{f, false})
				continue
			}
			switch {
			case o.Arg == RequiredArg:
				if why := value(&i, rest, f, o.Words); why != "" {
					return nil, why
				}
			case !safeLiteral(rest):
				return nil, "unsafe value for " + f
			}
			used = append(used, usedFlag{f, o.Arg == RequiredArg || rest != ""})
			break
		}
	}
	for k, op := range operands {
		if !safeLiteral(op) {
			return nil, "unsafe positional argument"
		}
		if c.name == "jq" && k == 0 && jqFilterDenied(op) {
			return nil, "jq filter uses a denied builtin"
		}
	}
	if len(operands) < c.min || len(operands) > c.max {
		return nil, "positional arguments out of range"
	}
	return used, ""
}

// obsoleteTail reports whether x (a first word without its "-") has the
// obsolete form GNU tail reads as one option, NUM[bcl][f] (`-cf` follows
// forever; it is not -c with the value "f"). A lone "c" is -c.
func obsoleteTail(x string) bool {
	if x == "" || x == "c" {
		return false
	}
	i := 0
	for i < len(x) && x[i] >= '0' && x[i] <= '9' {
		i++
	}
	if i < len(x) && strings.IndexByte("bcl", x[i]) >= 0 {
		i++
	}
	if i < len(x) && x[i] == 'f' {
		i++
	}
	return i == len(x)
}

// isOption reports whether the parser of grammar g reads word a as an
// option (or as "--"). `-` and the empty word are operands for both.
func isOption(g Grammar, a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	if g == JQ {
		c := a[1]
		return c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	return true
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
// custom nor a built-in profile: Evaluate ignores them, and
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
