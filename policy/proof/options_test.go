package proof

import (
	"context"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/policy"
)

// helpOption is an option as a tool's --help shows it.
type helpOption struct {
	arg   policy.ArgKind
	words int // jq: words after the option ("--arg a v" is 2)
}

var (
	helpLine  = regexp.MustCompile(`^\s+(-\S.*?)(\s{2,}|$)`)
	helpShort = regexp.MustCompile(`^-([A-Za-z0-9])$`)
	helpLong  = regexp.MustCompile(`^--([A-Za-z0-9][-A-Za-z0-9]*|-[-A-Za-z0-9]+)(\[=[^\]]*\]|=\S*)?$`)
)

// parseHelp reads the option names and argument markers of a --help text:
// "-b, --bytes=LIST" (required), "--group[=METHOD]" (optional), "-c,
// --check, --check=diagnose-first" (bare and with a value: optional). A
// short name takes the kind of the long names on its line when they agree
// on a required argument; otherwise none. jq lists its arguments as words
// ("--arg a v").
func parseHelp(text string, jq bool) (shorts, longs map[string]helpOption) {
	shorts, longs = map[string]helpOption{}, map[string]helpOption{}
	seenBare, seenValue := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		m := helpLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var lineShorts []string
		lineArg, lineArgs := policy.NoArg, 0
		fields := strings.Split(m[1], ", ")
		for fi, f := range fields {
			f = strings.TrimSuffix(strings.TrimSpace(f), ",")
			words := 0
			if jq {
				parts := strings.Fields(f)
				f, words = parts[0], len(parts)-1
			}
			if s := helpShort.FindStringSubmatch(f); s != nil {
				lineShorts = append(lineShorts, s[1])
				continue
			}
			l := helpLong.FindStringSubmatch(f)
			if l == nil {
				if fi == 0 {
					break // not an option line ("-NUM", "-M  from first…")
				}
				continue
			}
			name, marker := l[1], l[2]
			arg := policy.NoArg
			switch {
			case strings.HasPrefix(marker, "[="):
				arg = policy.OptionalArg
			case marker != "":
				arg = policy.RequiredArg
				seenValue[name] = true
			case words > 0:
				arg = policy.RequiredArg
			default:
				seenBare[name] = true
			}
			if seenBare[name] && seenValue[name] {
				arg = policy.OptionalArg
			}
			if old, ok := longs[name]; ok && old.arg == policy.OptionalArg {
				arg = policy.OptionalArg
			}
			longs[name] = helpOption{arg: arg, words: words}
			lineArg, lineArgs = arg, lineArgs+1
		}
		for _, s := range lineShorts {
			k := policy.NoArg
			if lineArgs > 0 && lineArg == policy.RequiredArg && !seenBare[firstLong(m[1])] {
				k = policy.RequiredArg
			}
			shorts[s] = helpOption{arg: k}
		}
	}
	return shorts, longs
}

func firstLong(s string) string {
	l := helpLong.FindStringSubmatch(strings.Fields(strings.ReplaceAll(s[strings.Index(s+"--", "--"):], ",", " "))[0])
	if l == nil {
		return ""
	}
	return l[1]
}

// toolVersion returns the last word of the first line of `tool --version`
// ("9.1", "jq-1.6" → "1.6").
func toolVersion(t *testing.T, path string) string {
	out, _ := exec.Command(path, "--version").Output()
	line, _, _ := strings.Cut(string(out), "\n")
	f := strings.Fields(line)
	if len(f) == 0 {
		return ""
	}
	return strings.TrimPrefix(f[len(f)-1], "jq-")
}

// versionLess compares dotted versions numerically.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// present reports whether the installed tool (version v) has option o.
func present(o policy.Option, v string) bool {
	return o.Since == "" || v == "" || !versionLess(v, o.Since)
}

// TestOptionTablesMatchHelp checks each option table against the installed
// tool's --help: every option --help lists is in the table with the same
// argument kind, and every table option the installed version has is in
// --help unless marked Hidden. A new coreutils, grep or jq option fails
// here until it is listed (and judged by the profiles).
func TestOptionTablesMatchHelp(t *testing.T) {
	for _, name := range sortedTools() {
		table := policy.OptionTables[name]
		t.Run(name, func(t *testing.T) {
			path, err := exec.LookPath(name)
			if err != nil {
				t.Skipf("%s is not installed: its option table is unchecked", name)
			}
			out, _ := exec.Command(path, "--help").Output()
			if len(out) == 0 {
				t.Fatalf("%s --help printed nothing", name)
			}
			jq := table.Grammar == policy.JQ
			shorts, longs := parseHelp(string(out), jq)
			version := toolVersion(t, path)
			tshort, tlong := map[string]policy.Option{}, map[string]policy.Option{}
			for _, o := range table.Options {
				if o.Short != "" {
					if _, dup := tshort[o.Short]; !dup {
						tshort[o.Short] = o
					}
				}
				if o.Long != "" {
					tlong[o.Long] = o
				}
			}
			for s, h := range shorts {
				if helpNotOptions[name+" -"+s] {
					continue
				}
				o, ok := tshort[s]
				switch {
				case !ok:
					t.Errorf("%s --help lists -%s: not in the option table", name, s)
				case o.Arg != h.arg && !jq:
					t.Errorf("-%s: table says %v, --help says %v", s, o.Arg, h.arg)
				}
			}
			for l, h := range longs {
				o, ok := tlong[l]
				switch {
				case !ok:
					t.Errorf("%s --help lists --%s: not in the option table", name, l)
				case o.Arg != h.arg:
					t.Errorf("--%s: table says %v, --help says %v", l, o.Arg, h.arg)
				case jq && h.words > 1 && o.Words != h.words:
					t.Errorf("--%s: table says %d words, --help says %d", l, o.Words, h.words)
				}
			}
			if jq {
				return // jq's --help lists only some options
			}
			for _, o := range table.Options {
				if o.Hidden || !present(o, version) {
					continue
				}
				if o.Long != "" {
					if _, ok := longs[o.Long]; !ok {
						t.Errorf("table option --%s is not in %s %s --help (mark it Hidden or Since)", o.Long, name, version)
					}
				} else if _, ok := shorts[o.Short]; !ok {
					t.Errorf("table option -%s is not in %s %s --help (mark it Hidden or Since)", o.Short, name, version)
				}
			}
		})
	}
}

// helpNotOptions are --help lines that look like options but are not.
var helpNotOptions = map[string]bool{
	"cut -M": true, // "-M  from first to M'th byte": the LIST syntax
}

var ambiguousRE = regexp.MustCompile(`'--([^']+)'`)

// TestOptionTablesMatchParser asks the installed tool's getopt_long about
// every one-letter prefix "--x" (and "---"): the options it names as
// possibilities of an ambiguous prefix must be in the table (this finds
// options --help does not list, like tail ---disable-inotify), and a prefix
// it does not recognise must match no table option it has.
func TestOptionTablesMatchParser(t *testing.T) {
	for _, name := range sortedTools() {
		table := policy.OptionTables[name]
		if table.Grammar != policy.GetoptLong {
			continue
		}
		t.Run(name, func(t *testing.T) {
			path, err := exec.LookPath(name)
			if err != nil {
				t.Skipf("%s is not installed: its option table is unchecked", name)
			}
			version := toolVersion(t, path)
			longs := map[string]bool{}
			for _, o := range table.Options {
				if o.Long != "" && present(o, version) {
					longs[o.Long] = true
				}
			}
			for _, c := range "abcdefghijklmnopqrstuvwxyz-" {
				prefix := string(c)
				// tail --follow never ends: a probe that runs until the
				// timeout counts as an accepted option.
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				cmd := exec.CommandContext(ctx, path, "--"+prefix)
				cmd.Env = []string{"LC_ALL=C", "PATH=/usr/bin:/bin"}
				cmd.Dir = t.TempDir()
				var stderr strings.Builder
				cmd.Stderr = &stderr
				_ = cmd.Run() // stdin is /dev/null
				timedOut := ctx.Err() != nil
				cancel()
				msg := stderr.String()
				var matching []string
				for l := range longs {
					if strings.HasPrefix(l, prefix) {
						matching = append(matching, l)
					}
				}
				switch {
				case strings.Contains(msg, "is ambiguous"):
					for _, m := range ambiguousRE.FindAllStringSubmatch(msg, -1) {
						if m[1] != prefix && !longs[m[1]] {
							t.Errorf("%s knows --%s (ambiguous prefix --%s): not in the option table", name, m[1], prefix)
						}
					}
				case strings.Contains(msg, "unrecognized option"):
					if len(matching) > 0 {
						t.Errorf("%s does not recognise --%s, the table has %v", name, prefix, matching)
					}
				case timedOut && len(matching) > 0:
				default:
					if len(matching) == 0 {
						t.Errorf("%s accepts --%s (%q), the table has no option with that prefix", name, prefix, firstLine(msg))
					}
				}
			}
		})
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func sortedTools() []string {
	var names []string
	for n := range policy.OptionTables {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
