package policy

import (
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// maxWrapperDepth bounds unwrapping, nested shells included.
const maxWrapperDepth = 4

// evaluator judges the segments of one request.
type evaluator struct {
	req      *Request
	r        *resolver
	allow    []allowPattern
	safe     map[string]bool
	profiles map[string]*compiledProfile // custom profiles; built-ins as fallback
	strict   bool

	lexicalTrust map[string]bool // trusted dirs as written, lazily built
	trusted      map[string]bool // the same plus their realpaths, lazily built
	trustedBuilt bool

	segments int      // segments judged so far, inline scripts included
	heredoc  bool     // an inner script had a heredoc
	warnings []string // collected once per request
}

// allowPattern is a normalised allowlist entry.
type allowPattern struct {
	raw, source string
	norm        string // ~ expanded, lower-cased if Env.FoldCase; "*" for the star entry
	literal     bool   // no wildcards: the realpath rule applies

	statDone bool
	info     fs.FileInfo // stat of the pattern's path (literal patterns)
	real     string
	path     string // the pattern's path (~ expanded, case kept), for literal patterns
}

func newEvaluator(req *Request) *evaluator {
	e := &evaluator{req: req, r: newResolver(req.Env), strict: req.StrictInlineEval}
	for i, a := range req.Allowlist {
		p, ok := normalizePattern(a.Pattern, req.Env.Home)
		if !ok {
			continue
		}
		src := a.Source
		if src == "" {
			src = "allowlist[" + strconv.Itoa(i) + "]"
		}
		if req.Env.FoldCase {
			p = strings.ToLower(p)
		}
		e.allow = append(e.allow, allowPattern{
			raw: a.Pattern, source: src, norm: p,
			literal: p != "*" && !hasWildcard(p),
		})
	}
	if req.SafeBins == nil {
		e.safe = defaultSafe
	} else {
		e.safe = make(map[string]bool, len(req.SafeBins))
		for _, b := range req.SafeBins {
			if b = strings.ToLower(strings.TrimSpace(b)); b != "" {
				e.safe[b] = true
			}
		}
	}
	if len(req.Profiles) > 0 {
		e.profiles = compileProfiles(req.Profiles)
	}
	for _, d := range req.TrustedDirs {
		d = strings.TrimSpace(d)
		switch {
		case d == "":
		case d == "~" || strings.HasPrefix(d, "~/"):
			if req.Env.Home == "" {
				e.warnings = append(e.warnings, `Warning: ignoring safe-bin trusted dir "`+d+`" (no home to expand ~).`)
			}
		case !filepath.IsAbs(d):
			e.warnings = append(e.warnings, `Warning: ignoring relative safe-bin trusted dir "`+d+`".`)
		}
	}
	return e
}

func (e *evaluator) profile(name string) *compiledProfile {
	if p, ok := e.profiles[name]; ok {
		return p
	}
	return builtinProfs[name]
}

// inTrusted reports whether the path and the realpath of res are both in
// a trusted directory. The directories are compared as
// written first; their realpaths are only computed when that fails.
func (e *evaluator) inTrusted(res resolved) bool {
	dir, realDir := filepath.Dir(res.path), filepath.Dir(res.real)
	if e.lexicalTrust == nil {
		e.lexicalTrust = e.r.lexicalTrustedSet(e.req.TrustedDirs)
	}
	if e.lexicalTrust[dir] && e.lexicalTrust[realDir] {
		return true
	}
	if !e.trustedBuilt {
		e.trusted = e.r.trustedSet(e.req.TrustedDirs)
		e.trustedBuilt = true
	}
	return e.trusted[dir] && e.trusted[realDir]
}

// allowMatch returns the first allowlist entry matching the resolved file:
// a glob on its path, or a wildcard-free pattern whose realpath equals its
// realpath.
func (e *evaluator) allowMatch(res resolved) *allowPattern {
	if a := e.allowMatchPath(res); a != nil {
		return a
	}
	return e.allowMatchReal(res)
}

// allowMatchPath is the glob half of allowMatch; it needs no filesystem.
func (e *evaluator) allowMatchPath(res resolved) *allowPattern {
	if res.path == "" {
		return nil
	}
	path := res.path
	if e.req.Env.WindowsPaths {
		path = strings.ReplaceAll(path, `\`, "/")
	}
	if e.req.Env.FoldCase {
		path = strings.ToLower(path)
	}
	for i := range e.allow {
		a := &e.allow[i]
		if a.norm == "*" || globMatch(a.norm, path) {
			return a
		}
	}
	return nil
}

// allowMatchReal is the realpath half of allowMatch: it stats every
// wildcard-free pattern once per evaluation.
func (e *evaluator) allowMatchReal(res resolved) *allowPattern {
	if res.path == "" {
		return nil
	}
	for i := range e.allow {
		a := &e.allow[i]
		if !a.literal {
			continue
		}
		if !a.statDone {
			a.statDone = true
			p, _ := normalizePattern(a.raw, e.req.Env.Home)
			if info, err := e.r.stat(p); err == nil && info.Mode().IsRegular() {
				a.info = info
			}
		}
		// Equal realpaths mean the same file, hence the same size and
		// modification time: a cheap filter before the realpath.
		if a.info == nil || res.info == nil || a.info.Size() != res.info.Size() || !a.info.ModTime().Equal(res.info.ModTime()) {
			continue
		}
		if a.real == "" {
			p, _ := normalizePattern(a.raw, e.req.Env.Home)
			if real, err := e.r.evalSymlinks(p); err == nil {
				a.real, a.path = real, p
				if !filepath.IsAbs(p) {
					a.path = real
				}
			} else {
				a.info = nil
				continue
			}
		}
		if a.real == res.real {
			return a
		}
	}
	return nil
}

func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func satisfied(v string) bool { return v == VerdictAllowlist || v == VerdictSafeBins }

// segment judges one simple command.
func (e *evaluator) segment(c *command, depth int) (Segment, []string) {
	seg := Segment{Text: c.text, Argv: make([]string, len(c.words))}
	for i, w := range c.words {
		seg.Argv[i] = w.arg()
	}
	pin := e.judge(&seg, c.words, depth, false)
	return seg, pin
}

func (e *evaluator) setVerdict(seg *Segment, verdict, rule string) {
	seg.Verdict, seg.Rule = verdict, rule
}

// judge fills seg for the command words (the first names the executable)
// and returns its pinned words when satisfied. depth counts the wrappers
// unwrapped so far; viaXargs is set for the command of xargs.
func (e *evaluator) judge(seg *Segment, words []word, depth int, viaXargs bool) []string {
	w0 := words[0]
	seg.Exe, seg.RealPath = "", ""
	if !w0.command() {
		e.setVerdict(seg, VerdictMiss, "non-literal command name "+w0.src)
		return nil
	}
	name := w0.val
	if !w0.tilde && !strings.Contains(name, "/") && builtinSet[name] {
		e.setVerdict(seg, VerdictBlocked, "shell builtin "+name)
		return nil
	}
	res := e.r.resolve(name, w0.tilde)
	if res.err != "" {
		seg.Exe, seg.RealPath = "", ""
		e.setVerdict(seg, VerdictMiss, "unresolved "+name+" ("+res.err+")")
		return nil
	}
	seg.Exe, seg.RealPath = res.path, res.real
	args := words[1:]

	argv0 := filepath.Base(name)
	pathBase, realBase := filepath.Base(res.path), filepath.Base(res.real)
	names := []string{argv0, pathBase}
	if !multiCallSet[realBase] {
		names = append(names, realBase)
	}
	var prefix []string // pinned words before the wrapper's arguments
	prefix = append(prefix, quote(res.path))
	if multiplexSet[argv0] {
		// busybox APPLET …: the applet decides. Other applets are judged
		// as the multiplexer itself, and allow-always persists nothing
		// for them.
		applet := ""
		if len(args) > 0 && args[0].lit {
			applet = args[0].val
		}
		if !blockedSet[applet] && !dispatchSet[applet] && !shellSet[applet] {
			pin := e.plain(seg, res, []string{argv0}, args, viaXargs)
			seg.persist = nil
			return pin
		}
		names = []string{applet}
		prefix = append(prefix, quote(applet))
		args = args[1:]
	}
	for _, n := range names {
		if blockedSet[n] {
			e.setVerdict(seg, VerdictBlocked, "blocked wrapper "+n)
			return nil
		}
	}
	dispatch, shell := "", ""
	for _, n := range names {
		switch {
		case dispatchSet[n]:
			if dispatch != "" && dispatch != n {
				e.setVerdict(seg, VerdictBlocked, "conflicting wrapper names "+dispatch+" and "+n)
				return nil
			}
			dispatch = n
		case shellSet[n]:
			shell = n
		}
	}
	if dispatch != "" && shell != "" {
		e.setVerdict(seg, VerdictBlocked, "conflicting wrapper names "+dispatch+" and "+shell)
		return nil
	}
	if dispatch == "" && shell == "" {
		return e.plain(seg, res, names, args, viaXargs)
	}
	if viaXargs {
		e.setVerdict(seg, VerdictMiss, "xargs runs a wrapper")
		return nil
	}
	if depth >= maxWrapperDepth {
		e.setVerdict(seg, VerdictBlocked, "wrapper depth exceeds "+strconv.Itoa(maxWrapperDepth))
		return nil
	}
	var pin []string
	if dispatch != "" {
		pin = e.dispatch(seg, dispatch, res, prefix, args, depth)
	} else {
		pin = e.shell(seg, shell, res, prefix, args, depth)
	}
	// A wrapper outside the trusted directories, or one that writes a
	// file itself when run with a terminal, is only transparent when it
	// is allowlisted itself.
	why := ""
	switch {
	case !e.inTrusted(res):
		why = "wrapper " + res.path + " is outside the trusted directories and not allowlisted"
	case e.req.Terminal && termFileSet[dispatch]:
		why = dispatch + " with a terminal writes " + dispatch + ".out; " + res.path + " is not allowlisted"
	}
	if why != "" && (satisfied(seg.Verdict) || len(seg.persist) > 0) && e.allowMatch(res) == nil {
		seg.persist = append([]string{res.path}, seg.persist...)
		if satisfied(seg.Verdict) {
			e.setVerdict(seg, VerdictMiss, why)
			return nil
		}
	}
	// A wrapper allowlisted only by realpath runs as the pattern's path,
	// like any command (see plain).
	if why != "" && len(pin) > 0 && e.allowMatchPath(res) == nil {
		if a := e.allowMatchReal(res); a != nil {
			pin[0] = quote(a.path)
		}
	}
	return pin
}

// plain judges a command that is not a wrapper: strict inline eval, then
// the allowlist, then the safe bins.
func (e *evaluator) plain(seg *Segment, res resolved, names []string, args []word, viaXargs bool) []string {
	if e.strict {
		if what, ok := inlineEval(names, args, viaXargs); ok {
			e.setVerdict(seg, VerdictBlocked, "strict inline eval ("+what+")")
			return nil
		}
	}
	// exe is the path the pinned command runs. A match by realpath (a
	// literal pattern naming the same file) runs the pattern's path, not
	// the word's: the word may be a symlink in a directory the agent can
	// write, retargeted between this check and the exec.
	allowed := func(a *allowPattern, exe string) []string {
		e.setVerdict(seg, VerdictAllowlist, a.source)
		seg.Pattern = a.raw
		pin := []string{quote(exe)}
		for _, w := range args {
			pin = append(pin, w.src)
		}
		return pin
	}
	if a := e.allowMatchPath(res); a != nil {
		return allowed(a, res.path)
	}
	if viaXargs {
		if a := e.allowMatchReal(res); a != nil {
			return allowed(a, a.path)
		}
		e.setVerdict(seg, VerdictMiss, "no allowlist entry (a command of xargs must be allowlisted)")
		seg.persist = []string{res.path}
		return nil
	}
	// The realpath rule of the allowlist needs a stat of every literal
	// pattern; a segment that passes a safe-bin profile does not need it
	// (either way it is satisfied and its arguments are literal).
	rule, why := e.safeBin(res, args)
	if why == "" {
		e.setVerdict(seg, VerdictSafeBins, rule)
		pin := []string{quote(res.path)}
		for _, w := range args {
			pin = append(pin, quote(w.val))
		}
		return pin
	}
	if a := e.allowMatchReal(res); a != nil {
		return allowed(a, a.path)
	}
	e.setVerdict(seg, VerdictMiss, "no allowlist entry; "+why)
	seg.persist = []string{res.path}
	return nil
}

// safeBin checks the safe-bin rules (listed, in a trusted dir, profiled, no
// expansion, argv passes the profile); it returns the rule, or why it is not a
// safe bin.
func (e *evaluator) safeBin(res resolved, args []word) (string, string) {
	name := filepath.Base(res.path)
	if !e.safe[name] {
		return "", "not a safe bin"
	}
	p := e.profile(name)
	if p == nil {
		return "", "safe bin " + name + " has no profile"
	}
	if !e.inTrusted(res) {
		return "", "safe bin " + name + " is not in a trusted directory"
	}
	if rb := filepath.Base(res.real); rb != name && !multiCallSet[rb] {
		return "", "safe bin " + name + " resolves to " + rb
	}
	vals := make([]string, len(args))
	for i, w := range args {
		if !w.lit {
			return "", "safe bin " + name + " with an expansion"
		}
		vals[i] = w.val
	}
	used, why := p.check(vals)
	if why != "" {
		return "", "safe bin " + name + ": " + why
	}
	rule := "profile " + name
	if d := describeFlags(used); d != "" {
		rule += " (" + d + ")"
	}
	return rule, ""
}

// inlineEval reports whether an interpreter evaluates inline code.
// It errs on the side of yes: options are found anywhere
// in the arguments, in clusters too, and an argument with an expansion, a
// program read from stdin ("-" or no script) or arguments from xargs count.
func inlineEval(names []string, args []word, viaXargs bool) (string, bool) {
	for _, spec := range inlineEvalTab {
		match := ""
		for _, n := range names {
			if nameMatches(spec.Name, n) {
				match = n
				break
			}
		}
		if match == "" {
			continue
		}
		if viaXargs {
			return match + " under xargs", true
		}
		script := false
		for i, a := range args {
			if !a.lit {
				return match + " with an expansion", true
			}
			t := a.val
			for _, l := range spec.Long {
				if t == l || strings.HasPrefix(t, l+"=") {
					return match + " " + l, true
				}
			}
			for _, s := range spec.Subcommands {
				if t == s {
					return match + " " + s, true
				}
			}
			if len(t) > 1 && t[0] == '-' && t[1] != '-' && spec.Short != "" && strings.ContainsAny(t[1:], spec.Short) {
				return match + " " + t, true
			}
			if t == "-" || stdinPath(t) {
				return match + " " + t, true
			}
			if spec.DataURL && (strings.HasPrefix(strings.ToLower(t), "data:") || strings.Contains(strings.ToLower(t), "=data:")) {
				return match + " with a data: URL", true
			}
			if len(t) > 1 && t[0] == '-' && t[1] != '-' && spec.ModuleShort != "" {
				if k := strings.IndexAny(t[1:], spec.ModuleShort); k >= 0 {
					v := t[2+k:]
					if v == "" && i+1 < len(args) {
						v = args[i+1].val
					}
					if !plainModule(v) {
						return match + " " + t + " with code", true
					}
				}
			}
			switch t {
			case "--version", "-V", "-v", "--help", "-h":
				script = true // exits before reading a program
			}
			if t != "" && t[0] != '-' {
				script = true
			}
		}
		if !script {
			return match + " reading a program from stdin", true
		}
		return "", false
	}
	return "", false
}

// stdinPath reports whether p names standard input or another open
// descriptor: a program read from it is inline code.
func stdinPath(p string) bool {
	p = filepath.Clean(p)
	if !strings.HasPrefix(p, "/") {
		p = "/" + strings.TrimLeft(p, "./") // ../../dev/stdin: erring on the side of yes
	}
	if p == "/dev/stdin" || strings.HasPrefix(p, "/dev/fd/") || p == "/dev/tty" {
		return true
	}
	if rest, ok := strings.CutPrefix(p, "/proc/"); ok {
		if _, fd, ok := strings.Cut(rest, "/"); ok && strings.HasPrefix(fd, "fd/") {
			return true
		}
	}
	return false
}

// plainModule reports whether v is a module name with an optional import
// list (`JSON`, `-strict`, `O=Deparse`, `List::Util=sum,max`), nothing that
// perl would read as code.
func plainModule(v string) bool {
	v = strings.TrimPrefix(v, "-")
	name, list, _ := strings.Cut(v, "=")
	if name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	for _, c := range list {
		if !(c == '_' || c == ':' || c == ',' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func nameMatches(pattern, name string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return pattern == name
}

// dispatch unwraps env, nice, nohup, stdbuf, timeout and xargs.
func (e *evaluator) dispatch(seg *Segment, name string, res resolved, prefix []string, args []word, depth int) []string {
	n, why := dispatchOptions(name, args)
	if why != "" {
		e.setVerdict(seg, VerdictBlocked, name+": "+why)
		return nil
	}
	inner := args[n:]
	if len(inner) == 0 {
		e.setVerdict(seg, VerdictBlocked, name+" without a command")
		return nil
	}
	if !inner[0].command() {
		e.setVerdict(seg, VerdictBlocked, name+" with a non-literal command")
		return nil
	}
	seg.Wrappers = append(seg.Wrappers, res.path)
	innerPin := e.judge(seg, inner, depth+1, name == "xargs")
	if innerPin == nil {
		return nil
	}
	if name == "env" {
		return innerPin // a no-op env is dropped
	}
	pin := append([]string(nil), prefix...)
	for _, w := range args[:n] {
		pin = append(pin, quote(w.val))
	}
	return append(pin, innerPin...)
}

// dispatchOptions checks the accepted option forms of a dispatch wrapper
// and returns how many words they take, or why the form is not accepted.
func dispatchOptions(name string, args []word) (int, string) {
	// Every option word must be literal; the command word is checked by
	// the caller.
	lit := func(i int) (string, bool) {
		if i >= len(args) || !args[i].lit {
			return "", false
		}
		return args[i].val, true
	}
	switch name {
	case "env":
		if t, ok := lit(0); ok && t == "--" {
			return 1, ""
		}
		if len(args) > 0 && args[0].lit && (strings.HasPrefix(args[0].val, "-") || strings.Contains(args[0].val, "=")) {
			return 0, "options and assignments are not accepted"
		}
		if len(args) > 0 && !args[0].lit {
			return 0, "non-literal argument"
		}
		return 0, ""
	case "nohup":
		if len(args) > 0 && args[0].lit && strings.HasPrefix(args[0].val, "-") {
			return 0, "options are not accepted"
		}
		return 0, ""
	case "nice":
		t, ok := lit(0)
		switch {
		case !ok:
			return 0, ""
		case len(t) > 1 && t[0] == '-' && allDigits(t[1:]):
			return 1, ""
		case t == "-n" || t == "--adjustment":
			if v, ok := lit(1); ok && isInt(v) {
				return 2, ""
			}
			return 0, "bad adjustment"
		case strings.HasPrefix(t, "--adjustment="):
			if isInt(strings.TrimPrefix(t, "--adjustment=")) {
				return 1, ""
			}
			return 0, "bad adjustment"
		case strings.HasPrefix(t, "-"):
			return 0, "option " + t + " is not accepted"
		}
		return 0, ""
	case "stdbuf":
		i := 0
		for {
			t, ok := lit(i)
			if !ok || !strings.HasPrefix(t, "-") {
				break
			}
			switch {
			case t == "-i" || t == "-o" || t == "-e":
				v, ok := lit(i + 1)
				if !ok || !bufMode(v) {
					return 0, "bad mode"
				}
				i += 2
			case len(t) > 2 && strings.Contains("ioe", t[1:2]) && t[0] == '-' && t[1] != '-':
				if !bufMode(t[2:]) {
					return 0, "bad mode"
				}
				i++
			case strings.HasPrefix(t, "--input=") || strings.HasPrefix(t, "--output=") || strings.HasPrefix(t, "--error="):
				_, v, _ := strings.Cut(t, "=")
				if !bufMode(v) {
					return 0, "bad mode"
				}
				i++
			default:
				return 0, "option " + t + " is not accepted"
			}
		}
		if i == 0 {
			return 0, "no buffering option"
		}
		return i, ""
	case "timeout":
		i := 0
		for {
			t, ok := lit(i)
			if !ok {
				return 0, "non-literal argument"
			}
			if !strings.HasPrefix(t, "-") {
				break
			}
			switch {
			case t == "-s" || t == "-k":
				v, ok := lit(i + 1)
				if !ok || (t == "-s" && !isSignal(v)) || (t == "-k" && !isDuration(v)) {
					return 0, "bad value for " + t
				}
				i += 2
			case strings.HasPrefix(t, "--signal="):
				if !isSignal(strings.TrimPrefix(t, "--signal=")) {
					return 0, "bad signal"
				}
				i++
			case strings.HasPrefix(t, "--kill-after="):
				if !isDuration(strings.TrimPrefix(t, "--kill-after=")) {
					return 0, "bad duration"
				}
				i++
			case t == "--preserve-status" || t == "--foreground" || t == "-v":
				i++
			default:
				return 0, "option " + t + " is not accepted"
			}
		}
		if t, _ := lit(i); !isDuration(t) {
			return 0, "missing duration"
		}
		return i + 1, ""
	case "xargs":
		n, repl, why := xargsOptions(args)
		if why == "" && n < len(args) {
			for _, r := range repl {
				if strings.Contains(args[n].val, r) {
					return 0, "the command contains the replace string " + strconv.Quote(r)
				}
			}
		}
		return n, why
	}
	return 0, "unknown wrapper"
}

// xargsOptions accepts GNU xargs options that do not change what runs
// (long options exactly, not abbreviated). It also returns the replace
// strings of -I and --replace: the command word must not contain them.
func xargsOptions(args []word) (int, []string, string) {
	// Not accepted, among others: -a/--arg-file (reads a file),
	// -p/--interactive and -o/--open-tty (open /dev/tty).
	const boolShort, valueShort = "0rtx", "dEILnPs"
	boolLong := map[string]bool{"--null": true, "--no-run-if-empty": true, "--verbose": true, "--exit": true}
	valueLong := []string{"--delimiter=", "--eof=", "--replace=", "--max-lines=", "--max-args=", "--max-procs=", "--max-chars="}
	var repl []string
	i := 0
	for i < len(args) {
		if !args[i].lit {
			return 0, nil, "non-literal argument"
		}
		t := args[i].val
		switch {
		case t == "--":
			return i + 1, repl, ""
		case strings.HasPrefix(t, "--"):
			i++
			if boolLong[t] {
				continue
			}
			ok := false
			for _, v := range valueLong {
				if strings.HasPrefix(t, v) {
					ok = true
				}
			}
			if !ok {
				return 0, nil, "option " + t + " is not accepted"
			}
			if r, ok := strings.CutPrefix(t, "--replace="); ok {
				repl = append(repl, r)
			}
		case len(t) > 1 && t[0] == '-':
			i++
		cluster:
			for j := 1; j < len(t); j++ {
				c := t[j : j+1]
				switch {
				case strings.Contains(boolShort, c):
				case strings.Contains(valueShort, c):
					v := t[j+1:]
					if v == "" {
						if i >= len(args) || !args[i].lit {
							return 0, nil, "bad value for -" + c
						}
						v = args[i].val
						i++
					}
					if c == "I" {
						repl = append(repl, v)
					}
					break cluster
				default:
					return 0, nil, "option -" + c + " is not accepted"
				}
			}
		default:
			return i, repl, ""
		}
	}
	return i, repl, ""
}

func isInt(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	return allDigits(s)
}

func bufMode(s string) bool {
	if s == "L" || s == "0" {
		return true
	}
	n := len(s)
	for n > 0 && (s[n-1] < '0' || s[n-1] > '9') {
		n--
	}
	unit := s[n:]
	if !allDigits(s[:n]) {
		return false
	}
	switch unit {
	case "", "k", "K", "M", "G", "T", "P", "E", "Z", "Y", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB":
		return true
	}
	return false
}

func isSignal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func isDuration(s string) bool {
	if s == "" {
		return false
	}
	switch s[len(s)-1] {
	case 's', 'm', 'h', 'd':
		s = s[:len(s)-1]
	}
	intPart, frac, hasFrac := strings.Cut(s, ".")
	if !allDigits(intPart) {
		return false
	}
	return !hasFrac || allDigits(frac)
}

// shell judges a shell wrapper.
func (e *evaluator) shell(seg *Segment, name string, res resolved, prefix []string, args []word, depth int) []string {
	i, sawC := 0, false
	noRC, rcOK := rcShells[name] // the option that skips the startup files
	shellOpts := "euxc" + noRC
	for i < len(args) {
		a := args[i]
		if !a.lit {
			if a.tilde && !sawC {
				break // a script under ~/
			}
			e.setVerdict(seg, VerdictMiss, name+" with a non-literal argument")
			return nil
		}
		t := a.val
		if t == "-o" {
			if i+1 < len(args) && args[i+1].lit && args[i+1].val == "pipefail" {
				i += 2
				continue
			}
			e.setVerdict(seg, VerdictMiss, name+" -o: only pipefail is accepted")
			return nil
		}
		if t == "--login" {
			e.setVerdict(seg, VerdictMiss, loginShell(name, t))
			return nil
		}
		if t == "--noprofile" || t == "--norc" {
			i++
			continue
		}
		if len(t) > 1 && t[0] == '-' && t[1] != '-' {
			for _, c := range t[1:] {
				if c == 'l' {
					e.setVerdict(seg, VerdictMiss, loginShell(name, t))
					return nil
				}
				if !strings.ContainsRune(shellOpts, c) || c == 'c' && sawC {
					e.setVerdict(seg, VerdictMiss, name+" option "+t+" is not accepted")
					return nil
				}
				if c == 'c' {
					sawC = true
				}
				if noRC != "" && c == rune(noRC[0]) {
					rcOK = false
				}
			}
			i++
			continue
		}
		if strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+") {
			e.setVerdict(seg, VerdictMiss, name+" option "+t+" is not accepted")
			return nil
		}
		break
	}
	pin := append([]string(nil), prefix...)
	for _, w := range args[:i] {
		pin = append(pin, quote(w.val))
	}
	if !sawC {
		if i >= len(args) {
			e.setVerdict(seg, VerdictMiss, name+" without -c or a script")
			return nil
		}
		return e.shellScript(seg, name, res, pin, args[i], args[i+1:])
	}
	if i >= len(args) {
		e.setVerdict(seg, VerdictMiss, name+" -c without a script")
		return nil
	}
	if i+1 < len(args) {
		e.setVerdict(seg, VerdictMiss, name+" -c: words after the script")
		return nil
	}
	if rcOK {
		e.setVerdict(seg, VerdictMiss, name+" -c without -"+noRC+": it runs the user's startup files, code the gate never judged")
		return nil
	}
	inner := analyze(args[i].val)
	if !inner.OK {
		rule := "inline script: " + inner.Reason
		if inner.Pos != "" {
			rule += " at " + inner.Pos
		}
		e.setVerdict(seg, VerdictMiss, rule)
		return nil
	}
	if e.segments += inner.segments(); e.segments > MaxSegments {
		e.setVerdict(seg, VerdictMiss, "inline script: "+tooManySegments(e.segments)+" with the enclosing command")
		return nil
	}
	var pinned strings.Builder
	ok, allSafe := true, true
	seg.Inner = inner.Parts
	for pi := range inner.Parts {
		part := &inner.Parts[pi]
		if pi > 0 {
			pinned.WriteString(opText(part.Op))
		}
		for si := range part.Segments {
			s, p := e.segment(inner.cmds[pi][si], depth+1)
			part.Segments[si] = s
			seg.persist = append(seg.persist, s.persist...)
			if !satisfied(s.Verdict) {
				ok = false
			}
			if s.Verdict != VerdictSafeBins {
				allSafe = false
			}
			if si > 0 {
				pinned.WriteString(" | ")
			}
			pinned.WriteString(strings.Join(p, " "))
		}
	}
	switch {
	case inner.Heredoc:
		e.heredoc = true
		e.setVerdict(seg, VerdictMiss, "inline script has a heredoc")
		return nil
	case !ok:
		e.setVerdict(seg, VerdictMiss, "inline script has a segment that is not satisfied")
		return nil
	}
	verdict := VerdictAllowlist
	if allSafe {
		verdict = VerdictSafeBins
	}
	e.setVerdict(seg, verdict, "shell "+name+" -c: every inner segment satisfied")
	return append(pin, quote(pinned.String()))
}

// loginShell is the rule of a login shell: it runs the profile files
// (/etc/profile, ~/.bash_profile, ~/.profile), code the gate never judged.
func loginShell(name, opt string) string {
	return name + " " + opt + ": a login shell runs profile files the gate never judged"
}

// shellScript judges `<shell> path/to/script [args]`: the script's realpath
// or the shell must match the allowlist.
func (e *evaluator) shellScript(seg *Segment, name string, shellRes resolved, pin []string, script word, rest []word) []string {
	p := script.val
	if !script.lit && !script.tilde {
		e.setVerdict(seg, VerdictMiss, name+" with a non-literal script")
		return nil
	}
	if script.tilde {
		var ok bool
		if p, ok = e.r.expandTilde(p); !ok || !strings.HasPrefix(script.val, "~/") {
			e.setVerdict(seg, VerdictMiss, name+" script "+script.val+" does not resolve")
			return nil
		}
	}
	abs, ok := e.r.abs(p)
	if !ok {
		e.setVerdict(seg, VerdictMiss, name+" script "+script.val+" does not resolve")
		return nil
	}
	res := e.r.file(abs, false)
	if res.err != "" {
		e.setVerdict(seg, VerdictMiss, name+" script "+script.val+": "+res.err)
		return nil
	}
	seg.Script = res.real
	a := e.allowMatch(resolved{path: res.real, real: res.real, info: res.info})
	if a == nil {
		a = e.allowMatch(shellRes)
	}
	if a == nil {
		e.setVerdict(seg, VerdictMiss, "no allowlist entry for script "+res.real)
		seg.persist = []string{res.real}
		return nil
	}
	e.setVerdict(seg, VerdictAllowlist, a.source)
	seg.Pattern = a.raw
	// The script judged is the realpath: run that, not a symlink the
	// agent could retarget between this check and the exec.
	pin = append(pin, quote(res.real))
	for _, w := range rest {
		pin = append(pin, w.src)
	}
	return pin
}

func opText(op string) string {
	if op == ";" {
		return "; "
	}
	return " " + op + " "
}
