package engine

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/term/render"
)

var untilKinds = map[string]bool{"exit": true, "regex": true, "port": true, "http": true, "file": true, "idle": true}

func invalid(format string, args ...any) apitype.Result {
	return processError(apitype.Errorf(apitype.CodeInvalidArgument, format, args...))
}

func elapsedText(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

// waitAction implements process wait: it checks the conditions, then
// tests them at every change of the session (and every 250 ms for the
// probes) until one holds, the session ends or the timeout passes.
func (e *Engine) waitAction(ctx context.Context, s *session, p apitype.ProcessParams) apitype.Result {
	c, bad := parseWait(p)
	if bad != nil {
		return *bad
	}
	w := &waiter{e: e, ctx: ctx, s: s, p: p, c: c, start: time.Now(), lastCursor: -1}
	w.lastChange = w.start
	st, _, _ := s.snapshot()
	w.cwd = st.Cwd
	deadline := time.NewTimer(c.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if r, done := w.check(); done {
			return r
		}
		select {
		case <-ctx.Done():
			return w.result("timeout", "", nil)
		case <-deadline.C:
			return w.result("timeout", "", nil)
		case <-s.changed():
		case <-tick.C:
		}
	}
}

// waitConds are a wait's parsed conditions.
type waitConds struct {
	until   []string
	echo    any // until as the caller sent it (a string or an array)
	re      *regexp.Regexp
	descs   []string // one per condition, for the texts
	desc    string   // descs joined
	idle    time.Duration
	timeout time.Duration
	since   int64 // the since argument as a cursor: matches start after it
}

// has reports whether the wait has the condition k.
func (c *waitConds) has(k string) bool {
	for _, u := range c.until {
		if u == k {
			return true
		}
	}
	return false
}

// parseWait checks wait's conditions and their arguments; a bad one is
// the invalid_argument result to answer.
func parseWait(p apitype.ProcessParams) (*waitConds, *apitype.Result) {
	c := &waitConds{until: p.Until, timeout: 30 * time.Second}
	if len(c.until) == 0 {
		c.until = []string{"exit"}
	}
	c.echo = c.until[0]
	if p.UntilArray {
		c.echo = p.Until
	}
	for _, u := range c.until {
		desc, bad := c.parseUntil(u, p)
		if bad != nil {
			return nil, bad
		}
		c.descs = append(c.descs, desc)
	}
	c.desc = strings.Join(c.descs, " or ")
	if p.Timeout != nil {
		c.timeout = time.Duration(min(max(*p.Timeout, 0), 600000)) * time.Millisecond
	}
	if p.Since != nil {
		c.since = cursorArg(*p.Since)
	}
	return c, nil
}

// parseUntil checks one condition u and returns its description.
func (c *waitConds) parseUntil(u string, p apitype.ProcessParams) (string, *apitype.Result) {
	bad := func(format string, args ...any) (string, *apitype.Result) {
		r := invalid(format, args...)
		return "", &r
	}
	if !untilKinds[u] {
		return bad("Invalid until %q: expected exit, regex, port, http, file or idle.", u)
	}
	switch u {
	case "regex":
		if p.Pattern == "" {
			return bad("pattern is required for until=regex.")
		}
		pat := p.Pattern
		if p.IgnoreCase != nil && *p.IgnoreCase {
			pat = "(?i)" + pat
		}
		var err error
		if c.re, err = regexp.Compile(pat); err != nil {
			return bad("Invalid pattern: %v", err)
		}
		return "regex /" + p.Pattern + "/", nil
	case "port":
		if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
			return bad("port is required for until=port (1-65535).")
		}
		return fmt.Sprintf("port %s:%d", waitHost(p.Host), int(*p.Port)), nil
	case "http":
		if !strings.HasPrefix(p.URL, "http://") && !strings.HasPrefix(p.URL, "https://") {
			return bad("url is required for until=http (http:// or https://).")
		}
		return "http " + p.URL, nil
	case "file":
		if p.Path == "" {
			return bad("path is required for until=file.")
		}
		return "file " + p.Path, nil
	case "idle":
		if p.IdleMs == nil {
			return bad("idleMs is required for until=idle (100-3600000).")
		}
		c.idle = time.Duration(min(max(*p.IdleMs, 100), 3600000)) * time.Millisecond
		return fmt.Sprintf("idle %d ms", c.idle.Milliseconds()), nil
	}
	return "exit", nil
}

// waiter is one process wait in progress; only its call's goroutine uses
// it.
type waiter struct {
	e     *Engine
	ctx   context.Context
	s     *session
	p     apitype.ProcessParams
	c     *waitConds
	start time.Time
	cwd   string // the session's cwd, for a relative until=file path
	// Incremental regex scan: base is the cursor after the last
	// complete line examined, baseLine its line count.
	base     int64
	baseLine int
	// lastCursor and lastChange: the output's end when it last moved,
	// and when (until=idle without the supervisor's figure).
	lastCursor int64
	lastChange time.Time
	prompt     *apitype.Awaiting // the prompt an "input" outcome reports
}

// check tests every condition once; done says r is the answer.
func (w *waiter) check() (r apitype.Result, done bool) {
	s, c := w.s, w.c
	_, ex, cursor := s.snapshot()
	ended := ex != nil
	if cursor != w.lastCursor {
		w.lastCursor, w.lastChange = cursor, time.Now()
	}
	if !s.pending() {
		if hit := w.regexHit(); hit != nil {
			return w.result("met", "regex", hit), true
		}
		if fired := w.probe(ended); fired != "" {
			return w.result("met", fired, nil), true
		}
		if c.has("idle") && !ended && w.idleFor() >= c.idle {
			return w.result("met", "idle", nil), true
		}
	}
	if ended {
		if c.has("exit") {
			return w.result("met", "exit", nil), true
		}
		return w.result("exited", "exit", nil), true
	}
	if !c.has("idle") {
		if a := w.e.awaiting(s); a != nil {
			w.prompt = a
			return w.result("input", "input", nil), true
		}
	}
	return apitype.Result{}, false
}

// regexHit scans the lines after the last complete one examined for the
// pattern (none: nil).
func (w *waiter) regexHit() *apitype.LineMatch {
	if w.c.re == nil {
		return nil
	}
	var hit *apitype.LineMatch
	n := w.baseLine
	readLines(w.s.journal(), readOpts{since: w.base, exact: true}, func(l render.Line) {
		// A partial last line (a prompt, "listening on :8080"
		// without a newline yet) is tested too, but examined
		// again until it is complete.
		if hit != nil {
			return
		}
		n++
		if !l.Partial {
			w.base, w.baseLine = l.End, n
		}
		if l.End > w.c.since && w.c.re.MatchString(l.Text) {
			hit = &apitype.LineMatch{Line: n, Offset: n - 1, Cursor: l.End, Text: render.CutLine(l.Text, quoteMax)}
		}
	})
	return hit
}

// probe tests the port, http and file conditions, in the sandbox's own
// network and filesystem for a sandboxed session, and returns the one
// that holds ("": none).
func (w *waiter) probe(ended bool) string {
	e, s, p, c := w.e, w.s, w.p, w.c
	inner := 0
	if (c.has("port") || c.has("http") || c.has("file")) && !ended {
		inner = e.sandboxInnerPID(s)
	}
	if inner > 0 {
		switch {
		case c.has("port") && sandbox.ProbeNet(inner, "port", net.JoinHostPort(waitHost(p.Host), strconv.Itoa(int(*p.Port)))):
			return "port"
		case c.has("http") && sandbox.ProbeNet(inner, "http", p.URL):
			return "http"
		case c.has("file") && sandbox.ProbeFile(inner, e.sandboxCwd(s), p.Path):
			return "file"
		}
		return ""
	}
	switch {
	case c.has("port") && e.probes().Port(w.ctx, waitHost(p.Host), int(*p.Port)):
		return "port"
	case c.has("http") && e.probes().HTTP(w.ctx, p.URL):
		return "http"
	case c.has("file"):
		path := p.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(w.cwd, path)
		}
		if _, err := os.Stat(path); err == nil {
			return "file"
		}
	}
	return ""
}

// idleFor is how long the session has printed nothing: the supervisor's
// figure, else the last change this wait saw.
func (w *waiter) idleFor() time.Duration {
	last := w.lastChange
	if stat, err := w.e.liveStatus(w.s); err == nil && stat.LastOutputNs > 0 {
		last = time.Unix(0, stat.LastOutputNs)
	}
	return time.Since(last)
}

// result is the answer of the wait: the output new to the caller, then
// what ended the wait.
func (w *waiter) result(outcome, fired string, m *apitype.LineMatch) apitype.Result {
	e, s, ctx := w.e, w.s, w.ctx
	elapsed := time.Since(w.start)
	if fired == "port" || fired == "http" || fired == "file" {
		// What the program printed before the probe succeeded (a
		// server's "listening" line, its log of the probe's
		// request) belongs in the output below.
		e.settleOutput(ctx, s)
	}
	st, ex, cursor := s.snapshot()
	tail, _, _ := e.viewTail(s, 2000)
	out := e.waitOutput(ctx, s, w.p.Since)
	if out.end > cursor {
		cursor = out.end
	}
	d := &apitype.WaitDetails{Status: runStatus(ex), Outcome: outcome, Until: w.c.echo, Fired: fired, SessionID: s.id,
		ElapsedMs: elapsed.Milliseconds(), Cursor: cursor, Since: out.since, SkippedChars: out.skippedChars,
		SkippedBytes: out.skippedBytes, Tail: tail, Match: m, State: "running"}
	if out.screen {
		d.View = "screen"
	}
	if s.pending() {
		d.Status, d.State = "pending", "pending"
	}
	if ex != nil {
		d.State, d.ExitCode, d.Signal, d.KilledBy = ex.State, ex.ExitCode, ex.Signal, ex.KilledBy
		s.update(func(st *state) { st.ObservedEnd = true })
	}
	text := w.outcomeText(outcome, fired, m, d, ex, elapsed)
	if ex != nil && (outcome == "exited" || fired == "exit") {
		if n := leftoverNote(*ex, st.Backgrounded); n != "" {
			text += "\n" + n
		}
	}
	// The output new to the caller comes first, as in poll: one
	// call shows what happened, not only that it happened.
	if out.text != "" {
		text = out.text + "\n\n" + text
	}
	return apitype.Result{Text: text, Details: d}
}

// outcomeText says what ended the wait; for an "input" outcome it also
// sets d's prompt.
func (w *waiter) outcomeText(outcome, fired string, m *apitype.LineMatch, d *apitype.WaitDetails, ex *proto.Exit, elapsed time.Duration) string {
	c := w.c
	switch outcome {
	case "met":
		if fired == "exit" {
			return endLine(ex)
		}
		text := fmt.Sprintf("Condition met: %s after %s.", strings.Join(descsFor(fired, c.descs, c.until), ""), elapsedText(elapsed))
		if m != nil {
			text += fmt.Sprintf("\nline %d: %s", m.Line, render.CutLine(m.Text, quoteMax))
		}
		return text
	case "exited":
		return strings.TrimSuffix(endLine(ex), ".") + " before the condition was met."
	case "timeout":
		what := "process still running"
		if d.State == "pending" {
			what = "approval still pending"
		}
		return fmt.Sprintf("Timed out after %d ms waiting for %s; %s.", c.timeout.Milliseconds(), c.desc, what)
	case "input":
		d.AwaitingInput = &apitype.Awaiting{Prompt: w.prompt.Prompt, IdleMs: w.prompt.IdleMs}
		return fmt.Sprintf("Process is awaiting input (%s) before the condition was met.", w.prompt.Prompt)
	}
	return ""
}

// waitOut is the output a wait result shows.
type waitOut struct {
	text         string // "" when nothing is new
	since, end   int64
	skippedChars int
	skippedBytes int64
	screen       bool // text is the terminal's screen
}

// waitOutput reads the output after since (the argument), or after the
// agent's drain cursor (what poll would show), bounded as poll is: the
// newest tools.exec.pendingMaxOutputChars, with a pointer to log for the
// rest. Like poll, it moves the drain cursor on, so the next poll does
// not repeat it; not when the call was cancelled (nobody will read it).
func (e *Engine) waitOutput(ctx context.Context, s *session, sinceArg *float64) waitOut {
	st, _, _ := s.snapshot()
	since := st.DrainCursors[s.agent]
	if sinceArg != nil {
		since = cursorArg(*sinceArg)
	}
	w := waitOut{since: since, end: since}
	if s.pending() {
		return w
	}
	if text, end, ok := e.screenView(s, since); ok {
		// A full-screen program: its screen, as poll shows it.
		w.end, w.text, w.screen = end, text, true
	} else {
		out, res, skipped, err := readNewOutput(s, readOpts{since: since}, e.conf().Exec(s.agent).PendingMaxOutputChars)
		if err != nil {
			w.text = fmt.Sprintf("(output unreadable: %v)", err)
			return w
		}
		w.end, w.skippedBytes, w.skippedChars = res.end, res.skippedBytes, skipped
		w.text = out
	}
	if ctx.Err() != nil {
		return w
	}
	s.update(func(st *state) {
		if st.DrainCursors == nil {
			st.DrainCursors = map[string]int64{}
		}
		if w.end > st.DrainCursors[s.agent] {
			st.DrainCursors[s.agent] = w.end
		}
	})
	return w
}

// settleOutput lets output the program wrote before a probe succeeded
// reach the journal: it asks the supervisor for its cursor (a round
// trip that its output pumps usually beat), then waits while output
// keeps arriving, 50 ms of quiet at most and 250 ms in all.
func (e *Engine) settleOutput(ctx context.Context, s *session) {
	if !s.running() {
		return
	}
	e.liveStatus(s)
	all := time.NewTimer(250 * time.Millisecond)
	defer all.Stop()
	for {
		quiet := time.NewTimer(50 * time.Millisecond)
		select {
		case <-s.changed():
			quiet.Stop()
			continue
		case <-quiet.C:
		case <-all.C:
			quiet.Stop()
		case <-ctx.Done():
			quiet.Stop()
		}
		return
	}
}

// descsFor returns the description of the condition that fired.
func descsFor(fired string, descs, until []string) []string {
	for i, u := range until {
		if u == fired {
			return []string{descs[i]}
		}
	}
	return []string{fired}
}

func waitHost(h string) string {
	if h == "" {
		return "127.0.0.1"
	}
	return h
}

// Probes answers the wait conditions port and http on the gateway's own
// network (a sandboxed session's are probed inside its sandbox). The
// adapter gives them at construction (Options.Probes; internal/adapter/waitprobe).
type Probes interface {
	// Port reports whether a TCP connection to host:port succeeds.
	Port(ctx context.Context, host string, port int) bool
	// HTTP reports whether a GET of url answers 2xx or 3xx.
	HTTP(ctx context.Context, url string) bool
}

// noProbes is the Probes of an engine given none (every program gives
// internal/adapter/waitprobe's): no port or http condition is ever met.
type noProbes struct{}

func (noProbes) Port(context.Context, string, int) bool { return false }

func (noProbes) HTTP(context.Context, string) bool { return false }

func (e *Engine) probes() Probes {
	if e.opt.Probes != nil {
		return e.opt.Probes
	}
	return noProbes{}
}

// searchAction implements process search.
func (e *Engine) searchAction(s *session, p apitype.ProcessParams) apitype.Result {
	if p.Pattern == "" {
		return invalid("pattern is required for search.")
	}
	pat := p.Pattern
	if p.IgnoreCase != nil && *p.IgnoreCase {
		pat = "(?i)" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return invalid("Invalid pattern: %v", err)
	}
	sc := &searchScan{re: re, maxN: 50, matches: []apitype.LineMatch{}}
	if p.Context != nil {
		sc.ctxLines = int(min(max(*p.Context, 0), 20))
	}
	if p.Max != nil {
		sc.maxN = int(min(max(*p.Max, 1), 1000))
	}
	if p.Since != nil {
		sc.since = cursorArg(*p.Since)
	}
	res, rerr := readLines(s.journal(), readOpts{stream: streamOf(p.Stream)}, sc.line)
	if rerr != nil {
		return processError(apitype.Errorf(apitype.CodeIOError, "read journal of %s: %v", s.id, rerr))
	}
	// The shown matches stop at the output budget.
	budget := e.conf().Exec(s.agent).MaxOutputChars
	listing, shown := searchListing(sc.groups, budget)
	matches, count, total := sc.matches, sc.count, sc.total
	atBudget := shown < len(matches)
	matches = matches[:shown]
	_, ex, _ := s.snapshot()
	text := listing + fmt.Sprintf("%d matches in %d lines (showing %d).", count, total, shown)
	if atBudget {
		text += fmt.Sprintf(" The output budget (%d chars) ends the list; narrow it with context, max or since=%d.", budget, matches[shown-1].Cursor)
	}
	if count == 0 {
		text = fmt.Sprintf("No matches for /%s/ in session %s (%d lines).", render.CutLine(p.Pattern, quoteMax), s.id, total)
	}
	return apitype.Result{Text: text, Details: &apitype.SearchDetails{
		Status: runStatus(ex), SessionID: s.id, Pattern: p.Pattern, TotalMatches: count, Returned: shown,
		Truncated: shown < count, Cursor: res.end, Matches: matches,
	}}
}

// numberedLine is a line of a search listing: its 1-based number, its
// text (cut to its start) and whether it matched.
type numberedLine struct {
	n       int
	text    string
	matched bool
}

// searchScan is one pass of search over the journal, in bounded memory:
// a ring of the last ctxLines lines for the context before a match, and
// the shown matches waiting for the context after them.
type searchScan struct {
	re       *regexp.Regexp
	ctxLines int
	maxN     int   // matches kept
	since    int64 // matches start after this cursor

	ring         []numberedLine
	matches      []apitype.LineMatch
	groups       [][]numberedLine // printed lines per shown match, merged later
	pendingAfter int
	total, count int // lines read, lines matched
}

// line takes the next line of the journal.
func (sc *searchScan) line(l render.Line) {
	sc.total++
	hit := l.End > sc.since && sc.re.MatchString(l.Text)
	// Only the start of a long line is ever shown: keep no more.
	cur := numberedLine{n: sc.total, text: render.CutLine(l.Text, quoteMax), matched: hit}
	if sc.pendingAfter > 0 && len(sc.groups) > 0 {
		g := &sc.groups[len(sc.groups)-1]
		*g = append(*g, cur)
		m := &sc.matches[len(sc.matches)-1]
		m.After = append(m.After, cur.text)
		sc.pendingAfter--
	}
	if hit {
		sc.count++
		if len(sc.matches) < sc.maxN {
			m := apitype.LineMatch{Line: sc.total, Offset: sc.total - 1, Cursor: l.End, Text: cur.text}
			var g []numberedLine
			for _, r := range sc.ring {
				m.Before = append(m.Before, r.text)
				g = append(g, r)
			}
			g = append(g, cur)
			sc.matches = append(sc.matches, m)
			sc.groups = append(sc.groups, g)
			sc.pendingAfter = sc.ctxLines
		}
	}
	if sc.ctxLines > 0 {
		sc.ring = append(sc.ring, cur)
		if len(sc.ring) > sc.ctxLines {
			sc.ring = sc.ring[1:]
		}
	}
}

// searchListing prints the groups of lines of the shown matches, grep
// style ("N:match", "N-context", "--" between groups apart), as many as
// fit in budget code points (at least one), and how many it printed.
func searchListing(groups [][]numberedLine, budget int) (string, int) {
	var b strings.Builder
	lastPrinted, chars, shown := 0, 0, 0
	for _, g := range groups {
		var gb strings.Builder
		if lastPrinted > 0 && g[0].n > lastPrinted+1 {
			gb.WriteString("--\n")
		}
		last := lastPrinted
		for _, ln := range g {
			if ln.n <= last {
				continue
			}
			sep := "-"
			if ln.matched {
				sep = ":"
			}
			fmt.Fprintf(&gb, "%d%s%s\n", ln.n, sep, ln.text)
			last = ln.n
		}
		k := utf8.RuneCountInString(gb.String())
		if shown > 0 && chars+k > budget {
			break
		}
		b.WriteString(gb.String())
		chars += k
		lastPrinted = last
		shown++
	}
	return b.String(), shown
}
