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
	"github.com/conchsh/conch/internal/render"
	"github.com/conchsh/conch/internal/sandbox"
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

// waitAction implements process wait.
func (e *Engine) waitAction(ctx context.Context, s *session, p apitype.ProcessParams) apitype.Result {
	until := p.Until
	if len(until) == 0 {
		until = []string{"exit"}
	}
	var echo any = until[0]
	if p.UntilArray {
		echo = p.Until
	}
	var re *regexp.Regexp
	var descs []string
	var idle time.Duration
	st, _, _ := s.snapshot()
	for _, u := range until {
		if !untilKinds[u] {
			return invalid("Invalid until %q: expected exit, regex, port, http, file or idle.", u)
		}
		switch u {
		case "exit":
			descs = append(descs, "exit")
		case "regex":
			if p.Pattern == "" {
				return invalid("pattern is required for until=regex.")
			}
			pat := p.Pattern
			if p.IgnoreCase != nil && *p.IgnoreCase {
				pat = "(?i)" + pat
			}
			var err error
			if re, err = regexp.Compile(pat); err != nil {
				return invalid("Invalid pattern: %v", err)
			}
			descs = append(descs, "regex /"+p.Pattern+"/")
		case "port":
			if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
				return invalid("port is required for until=port (1-65535).")
			}
			descs = append(descs, fmt.Sprintf("port %s:%d", waitHost(p.Host), int(*p.Port)))
		case "http":
			if !strings.HasPrefix(p.URL, "http://") && !strings.HasPrefix(p.URL, "https://") {
				return invalid("url is required for until=http (http:// or https://).")
			}
			descs = append(descs, "http "+p.URL)
		case "file":
			if p.Path == "" {
				return invalid("path is required for until=file.")
			}
			descs = append(descs, "file "+p.Path)
		case "idle":
			if p.IdleMs == nil {
				return invalid("idleMs is required for until=idle (100-3600000).")
			}
			idle = time.Duration(min(max(*p.IdleMs, 100), 3600000)) * time.Millisecond
			descs = append(descs, fmt.Sprintf("idle %d ms", idle.Milliseconds()))
		}
	}
	desc := strings.Join(descs, " or ")
	timeout := 30 * time.Second
	if p.Timeout != nil {
		timeout = time.Duration(min(max(*p.Timeout, 0), 600000)) * time.Millisecond
	}
	since := int64(0)
	if p.Since != nil {
		since = cursorArg(*p.Since)
	}
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	has := func(k string) bool {
		for _, u := range until {
			if u == k {
				return true
			}
		}
		return false
	}
	// Incremental regex scan: base is the cursor after the last complete
	// line examined, baseLine its line count.
	var base int64
	baseLine := 0
	lastCursor, lastChange := int64(-1), start
	var prompt *apitype.Awaiting // the prompt an "input" outcome reports
	result := func(outcome, fired string, m *apitype.LineMatch) apitype.Result {
		elapsed := time.Since(start)
		if fired == "port" || fired == "http" || fired == "file" {
			// What the program printed before the probe succeeded (a
			// server's "listening" line, its log of the probe's
			// request) belongs in the output below.
			e.settleOutput(ctx, s)
		}
		st, ex, cursor := s.snapshot()
		tail, _, _ := e.viewTail(s, 2000)
		out := e.waitOutput(ctx, s, p.Since)
		if out.end > cursor {
			cursor = out.end
		}
		d := &apitype.WaitDetails{Status: runStatus(ex), Outcome: outcome, Until: echo, Fired: fired, SessionID: s.id,
			ElapsedMs: elapsed.Milliseconds(), Cursor: cursor, Since: out.since, SkippedChars: out.skippedChars,
			SkippedBytes: out.skippedBytes, Tail: tail, Match: m, State: "running"}
		if out.screen {
			d.View = "screen"
		}
		if s.pending() {
			d.Status, d.State = "pending", "pending"
		}
		var text string
		if ex != nil {
			d.State, d.ExitCode, d.Signal, d.KilledBy = ex.State, ex.ExitCode, ex.Signal, ex.KilledBy
			s.update(func(st *state) { st.ObservedEnd = true })
		}
		switch outcome {
		case "met":
			if fired == "exit" {
				text = endLine(ex)
			} else {
				text = fmt.Sprintf("Condition met: %s after %s.", strings.Join(descsFor(fired, descs, until), ""), elapsedText(elapsed))
				if m != nil {
					text += fmt.Sprintf("\nline %d: %s", m.Line, render.CutLine(m.Text, quoteMax))
				}
			}
		case "exited":
			text = strings.TrimSuffix(endLine(ex), ".") + " before the condition was met."
		case "timeout":
			what := "process still running"
			if d.State == "pending" {
				what = "approval still pending"
			}
			text = fmt.Sprintf("Timed out after %d ms waiting for %s; %s.", timeout.Milliseconds(), desc, what)
		case "input":
			text = fmt.Sprintf("Process is awaiting input (%s) before the condition was met.", prompt.Prompt)
			d.AwaitingInput = &apitype.Awaiting{Prompt: prompt.Prompt, IdleMs: prompt.IdleMs}
		}
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
	for {
		_, ex, cursor := s.snapshot()
		ended := ex != nil
		if cursor != lastCursor {
			lastCursor, lastChange = cursor, time.Now()
		}
		if !s.pending() {
			if re != nil {
				var hit *apitype.LineMatch
				n := baseLine
				readLines(s.journal(), readOpts{since: base, exact: true}, func(l render.Line) {
					// A partial last line (a prompt, "listening on :8080"
					// without a newline yet) is tested too, but examined
					// again until it is complete.
					if hit != nil {
						return
					}
					n++
					if !l.Partial {
						base, baseLine = l.End, n
					}
					if l.End > since && re.MatchString(l.Text) {
						hit = &apitype.LineMatch{Line: n, Offset: n - 1, Cursor: l.End, Text: render.CutLine(l.Text, quoteMax)}
					}
				})
				if hit != nil {
					return result("met", "regex", hit)
				}
			}
			inner := 0
			if (has("port") || has("http") || has("file")) && !ended {
				inner = e.sandboxInnerPID(s)
			}
			switch {
			case inner > 0:
				// Probe the sandbox's own network and filesystem.
				if has("port") && sandbox.ProbeNet(inner, "port", net.JoinHostPort(waitHost(p.Host), strconv.Itoa(int(*p.Port)))) {
					return result("met", "port", nil)
				}
				if has("http") && sandbox.ProbeNet(inner, "http", p.URL) {
					return result("met", "http", nil)
				}
				if has("file") && sandbox.ProbeFile(inner, e.sandboxCwd(s), p.Path) {
					return result("met", "file", nil)
				}
			default:
				if has("port") && e.probes().Port(ctx, waitHost(p.Host), int(*p.Port)) {
					return result("met", "port", nil)
				}
				if has("http") && e.probes().HTTP(ctx, p.URL) {
					return result("met", "http", nil)
				}
				if has("file") {
					path := p.Path
					if !filepath.IsAbs(path) {
						path = filepath.Join(st.Cwd, path)
					}
					if _, err := os.Stat(path); err == nil {
						return result("met", "file", nil)
					}
				}
			}
			if has("idle") && !ended {
				last := lastChange
				if stat, err := e.liveStatus(s); err == nil && stat.LastOutputNs > 0 {
					last = time.Unix(0, stat.LastOutputNs)
				}
				if time.Since(last) >= idle {
					return result("met", "idle", nil)
				}
			}
		}
		if ended {
			if has("exit") {
				return result("met", "exit", nil)
			}
			return result("exited", "exit", nil)
		}
		if !has("idle") {
			if a := e.awaiting(s); a != nil {
				prompt = a
				return result("input", "input", nil)
			}
		}
		select {
		case <-ctx.Done():
			return result("timeout", "", nil)
		case <-deadline.C:
			return result("timeout", "", nil)
		case <-s.changed():
		case <-tick.C:
		}
	}
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
// adapter gives them at construction (Options.Probes; internal/waitprobe).
type Probes interface {
	// Port reports whether a TCP connection to host:port succeeds.
	Port(ctx context.Context, host string, port int) bool
	// HTTP reports whether a GET of url answers 2xx or 3xx.
	HTTP(ctx context.Context, url string) bool
}

// noProbes is the Probes of an engine given none (every program gives
// internal/waitprobe's): no port or http condition is ever met.
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
	ctxLines := 0
	if p.Context != nil {
		ctxLines = int(min(max(*p.Context, 0), 20))
	}
	maxN := 50
	if p.Max != nil {
		maxN = int(min(max(*p.Max, 1), 1000))
	}
	since := int64(0)
	if p.Since != nil {
		since = cursorArg(*p.Since)
	}
	cut := func(t string) string { return render.CutLine(t, quoteMax) }
	// One pass, bounded memory: a ring of the last ctxLines lines for the
	// context before a match, and the shown matches waiting for the
	// context after them.
	type numbered struct {
		n       int
		text    string
		matched bool
	}
	var ring []numbered
	matches := []apitype.LineMatch{}
	var groups [][]numbered // printed lines per shown match, merged later
	pendingAfter := 0
	total, count := 0, 0
	res, rerr := readLines(s.journal(), readOpts{stream: streamOf(p.Stream)}, func(l render.Line) {
		total++
		hit := l.End > since && re.MatchString(l.Text)
		// Only the start of a long line is ever shown: keep no more.
		cur := numbered{n: total, text: cut(l.Text), matched: hit}
		if pendingAfter > 0 && len(groups) > 0 {
			g := &groups[len(groups)-1]
			*g = append(*g, cur)
			m := &matches[len(matches)-1]
			m.After = append(m.After, cur.text)
			pendingAfter--
		}
		if hit {
			count++
			if len(matches) < maxN {
				m := apitype.LineMatch{Line: total, Offset: total - 1, Cursor: l.End, Text: cur.text}
				var g []numbered
				for _, r := range ring {
					m.Before = append(m.Before, r.text)
					g = append(g, r)
				}
				g = append(g, cur)
				matches = append(matches, m)
				groups = append(groups, g)
				pendingAfter = ctxLines
			}
		}
		if ctxLines > 0 {
			ring = append(ring, cur)
			if len(ring) > ctxLines {
				ring = ring[1:]
			}
		}
	})
	if rerr != nil {
		return processError(apitype.Errorf(apitype.CodeIOError, "read journal of %s: %v", s.id, rerr))
	}
	// The shown matches stop at the output budget.
	budget := e.conf().Exec(s.agent).MaxOutputChars
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
	atBudget := shown < len(matches)
	matches = matches[:shown]
	_, ex, _ := s.snapshot()
	text := b.String() + fmt.Sprintf("%d matches in %d lines (showing %d).", count, total, shown)
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
