package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/term/keys"
	"github.com/conchsh/conch/internal/term/render"
	"github.com/conchsh/conch/internal/term/visible"
)

// Process runs the process tool for agent (docs/tools.md).
func (e *Engine) Process(ctx context.Context, agent string, p apitype.ProcessParams) apitype.Result {
	res := withNotes(e.process(ctx, agent, p), p.Notes)
	if isOperator(ctx) {
		// The agent's queued events are for the agent's model, not for
		// an operator acting for it.
		return res
	}
	return e.withNotices(agent, res)
}

// withNotes adds the notes of the arguments' parsing (numbers clamped
// into range) to a result: the warnings of an exec result, which lead
// its text, or a last paragraph of any other.
func withNotes(res apitype.Result, notes []string) apitype.Result {
	if len(notes) == 0 {
		return res
	}
	if d, ok := res.Details.(*apitype.ExecDetails); ok {
		var ws []string
		for _, n := range notes {
			ws = append(ws, "Warning: "+n)
		}
		d.Warnings = append(ws, d.Warnings...)
		res.Text = withWarnings(ws, res.Text)
		return res
	}
	res.Text += "\n\nNote: " + strings.Join(notes, "\nNote: ")
	return res
}

// Read runs a process action without delivering the agent's queued
// events in its text: for readers that are not the agent's model (the
// session stream, the UI).
func (e *Engine) Read(ctx context.Context, agent string, p apitype.ProcessParams) apitype.Result {
	return e.process(ctx, agent, p)
}

func processError(err *apitype.Error) apitype.Result {
	return apitype.Result{Text: err.Message, Details: &apitype.ErrorDetails{Status: "failed", Error: err}}
}

func notFound(id string) *apitype.Error {
	return apitype.Errorf(apitype.CodeNotFound, "No session found for %s", id)
}

func noActive(id string) *apitype.Error {
	return apitype.Errorf(apitype.CodeNotFound, "No active session found for %s", id)
}

func (e *Engine) process(ctx context.Context, agent string, p apitype.ProcessParams) apitype.Result {
	if e.isClosed() {
		// Not "No session found": the sessions live on; this engine is
		// going away (the next one picks them up).
		return processError(apitype.Errorf(apitype.CodeUnavailable, stoppingText))
	}
	if p.Action == "list" {
		return e.list(agent)
	}
	if p.SessionID == "" {
		return processError(apitype.Errorf(apitype.CodeInvalidArgument, "sessionId is required for this action."))
	}
	s := e.lookup(agent, p.SessionID)
	if s == nil {
		return processError(notFound(p.SessionID))
	}
	st, _, _ := s.snapshot()
	if st.Hidden {
		return processError(notFound(p.SessionID))
	}
	if s.running() && !st.Backgrounded {
		return processError(apitype.Errorf(apitype.CodeInvalidState, "Session %s is not backgrounded.", s.id))
	}
	if p.Action == "wait" {
		return e.waitAction(ctx, s, p)
	}
	if s.pending() {
		return e.pendingAction(s, st, p)
	}
	switch p.Action {
	case "poll":
		return e.poll(ctx, s, agent, p)
	case "log":
		return e.logAction(s, p)
	case "search":
		return e.searchAction(s, p)
	case "screen":
		return e.screenAction(s, p)
	case "write", "send-keys", "submit", "paste":
		return e.input(s, p)
	case "kill":
		return e.kill(s, isOperator(ctx))
	case "clear":
		if s.running() {
			return processError(apitype.Errorf(apitype.CodeNotFound, "No finished session found for %s", s.id))
		}
		e.forget(s)
		e.removeSession(s)
		return apitype.Result{Text: fmt.Sprintf("Cleared session %s.", s.id), Details: &apitype.StatusDetails{Status: "completed", SessionID: s.id, Name: st.Name}}
	case "remove":
		return e.removeAction(s, isOperator(ctx))
	}
	return processError(apitype.Errorf(apitype.CodeUnavailable, "process %s is not available in this build yet.", p.Action))
}

// pendingAction answers the actions on a session reserved by an open
// approval request: no process exists yet.
func (e *Engine) pendingAction(s *session, st state, p apitype.ProcessParams) apitype.Result {
	s.mu.Lock()
	req := s.approval
	s.mu.Unlock()
	slug, aid := "", ""
	if req != nil {
		slug, aid = req.Slug, req.ID
	}
	switch p.Action {
	case "poll":
		if p.Timeout != nil && *p.Timeout > 0 {
			// Wait for the decision (not for the whole run): a decided
			// poll then answers like any poll.
			deadline := time.After(time.Duration(min(*p.Timeout, 120000)) * time.Millisecond)
		wait:
			for s.pending() {
				select {
				case <-s.changed():
				case <-time.After(100 * time.Millisecond):
				case <-deadline:
					break wait
				}
			}
			if !s.pending() {
				q := p
				q.Timeout = nil
				return e.process(context.Background(), s.agent, q)
			}
		}
		return apitype.Result{
			Text:    fmt.Sprintf("(no new output)\n\nApproval pending (id %s); the command has not started.", slug),
			Details: &apitype.PollDetails{Status: "pending", State: "pending", SessionID: s.id, Name: st.Name, ApprovalID: aid},
		}
	case "log":
		return apitype.Result{Text: "(no output yet)", Details: &apitype.LogDetails{Status: "pending", State: "pending", SessionID: s.id, Name: st.Name}}
	case "remove":
		e.withdraw(s)
		if s.running() {
			// The approval was decided first: the run is being stopped.
			return apitype.Result{Text: fmt.Sprintf("Removed session %s (termination requested).", s.id), Details: &apitype.StatusDetails{Status: "running", SessionID: s.id, Name: st.Name}}
		}
		e.forget(s)
		e.removeSession(s)
		return apitype.Result{Text: fmt.Sprintf("Removed session %s (approval withdrawn).", s.id), Details: &apitype.StatusDetails{Status: "completed", SessionID: s.id, Name: st.Name}}
	case "clear":
		return processError(apitype.Errorf(apitype.CodeNotFound, "No finished session found for %s", s.id))
	}
	return processError(noActive(s.id))
}

// listStatus is the status word of list and poll.
func listStatus(ex *proto.Exit) string {
	if ex == nil {
		return "running"
	}
	switch ex.State {
	case proto.StateExited:
		if *ex.ExitCode == 0 {
			return "completed"
		}
		return "failed"
	case proto.StateKilled, proto.StateLost, proto.StateDenied:
		return ex.State
	}
	return "failed"
}

// runStatus is the status of poll, log and wait results: running,
// completed (exit 0) or failed.
func runStatus(ex *proto.Exit) string {
	if ex == nil {
		return "running"
	}
	if ex.State == proto.StateExited && *ex.ExitCode == 0 {
		return "completed"
	}
	return "failed"
}

// ListAll is the list action over every agent's sessions, each entry
// naming its agent: for operators (GET /v1/sessions?all=true).
func (e *Engine) ListAll() apitype.Result { return e.list("") }

func (e *Engine) list(agent string) apitype.Result {
	ss := e.sessions.Select(func(s *session) bool { return s.agent == agent || agent == "" })
	var entries []apitype.SessionEntry
	for _, s := range ss {
		st, ex, cursor := s.snapshot()
		if st.Hidden || !(st.Backgrounded || st.Retained) {
			continue
		}
		entries = append(entries, e.entry(s, st, ex, cursor))
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].StartedAt != entries[j].StartedAt {
			return entries[i].StartedAt > entries[j].StartedAt
		}
		return entries[i].SessionID < entries[j].SessionID
	})
	if entries == nil {
		entries = []apitype.SessionEntry{}
	}
	// The list stops at the output budget; details.sessions has every
	// entry.
	budget := e.conf().Exec(agent).MaxOutputChars
	var b strings.Builder
	chars := 0
	for i, en := range entries {
		label := render.MiddleTruncate(en.Command, 120)
		if en.Name != "" {
			label = render.MiddleTruncate(en.Name, 80)
		}
		if en.AwaitingInput != nil {
			label += " [awaiting input]"
		}
		// One line per session, whatever the command or name holds.
		line := fmt.Sprintf("%s %-9s %s :: %s", en.SessionID, en.Status, compactDuration(time.Duration(en.RuntimeMs)*time.Millisecond), visible.Line(label))
		k := utf8.RuneCountInString(line) + 1
		if i > 0 && chars+k > budget {
			fmt.Fprintf(&b, "\n[… %d more sessions not shown (output budget %d chars); details.sessions lists them all]", len(entries)-i, budget)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
		chars += k
	}
	text := b.String()
	if len(entries) == 0 {
		text = "No running or recent sessions."
	}
	return apitype.Result{Text: text, Details: &apitype.ListDetails{Status: "completed", Sessions: entries}}
}

func (e *Engine) entry(s *session, st state, ex *proto.Exit, cursor int64) apitype.SessionEntry {
	tail, _, _ := e.viewTail(s, 2000)
	s.mu.Lock()
	pid := s.pid
	req := s.approval
	aid := s.approvalID
	s.mu.Unlock()
	en := apitype.SessionEntry{
		SessionID: s.id, Agent: s.agent, Status: listStatus(ex), State: "running", PID: &pid, StartedAt: s.start.UnixMilli(),
		Cwd: st.Cwd, Command: st.Command, Name: st.Name, Tail: tail, Host: st.Host, NodeID: st.NodeID, PTY: st.PTY,
		Backgrounded: st.Backgrounded, Cursor: cursor,
	}
	en.RuntimeMs = time.Since(s.start).Milliseconds()
	if a := e.awaiting(s); a != nil {
		en.AwaitingInput = &apitype.Awaiting{Prompt: a.Prompt, IdleMs: a.IdleMs}
	}
	en.ApprovalID = aid
	if req != nil {
		en.Status, en.State, en.PID, en.ApprovalID = "pending", "pending", nil, req.ID
	}
	if pid == 0 {
		en.PID = nil
	}
	if ex != nil {
		en.State = ex.State
		en.EndedAt = &ex.EndedAt
		d := ex.DurationMs
		en.DurationMs = &d
		en.RuntimeMs = d
		en.ExitCode, en.Signal, en.ExitSignal, en.KilledBy = ex.ExitCode, ex.Signal, ex.Signal, ex.KilledBy
		dk := ex.DescendantsKilled
		en.DescendantsKilled = &dk
		if ex.State == proto.StateDenied {
			en.Reason = ex.Reason
			en.PID = nil
		}
	}
	en.OutputLoss = outputLoss(s, ex)
	en.Truncated = en.OutputLoss.Lost()
	return en
}

// outputLoss is what of a session's output is gone for good: from its
// end state once it ended, else from its journal (the cap's drops so
// far). Every view of a session reports it the same way.
func outputLoss(s *session, ex *proto.Exit) apitype.OutputLoss {
	if ex != nil {
		l := apitype.OutputLoss{DroppedBytes: ex.DroppedBytes, UnrecordedBytes: ex.UnrecordedBytes}
		if l.DroppedBytes == 0 {
			// An end state written by the engine (lost) does not know.
			info, _ := journal.Stat(s.journal())
			l.DroppedBytes = info.DroppedBytes
		}
		return l
	}
	info, _ := journal.Stat(s.journal())
	return apitype.OutputLoss{DroppedBytes: info.DroppedBytes}
}

// endLine is the state sentence that ends a poll text.
func endLine(ex *proto.Exit) string {
	if ex == nil {
		return "Process still running."
	}
	switch ex.State {
	case proto.StateExited:
		return fmt.Sprintf("Process exited with code %d.", *ex.ExitCode)
	case proto.StateSignaled:
		return fmt.Sprintf("Process exited with signal %s.", deref(ex.Signal))
	case proto.StateKilled:
		if r, ok := strings.CutPrefix(ex.Reason, "Command killed: "); ok && deref(ex.KilledBy) == string(proto.KilledByOOM) {
			return "Process was killed: " + r + "." // out of memory, with the limit
		}
		sig := "SIGTERM"
		if ex.Signal != nil {
			sig = *ex.Signal
		}
		return fmt.Sprintf("Process was killed by %s (signal %s).", deref(ex.KilledBy), sig)
	case proto.StateLost:
		if r, ok := strings.CutPrefix(ex.Reason, "Command lost: "); ok && !strings.HasPrefix(r, "its supervisor ended") {
			return "Process lost: " + r // a node session's reason
		}
		return "Process lost (its supervisor ended without an exit status)."
	case proto.StateDenied:
		return "Not run: exec denied (" + ex.Reason + ")."
	}
	return "Process ended (" + ex.State + ")."
}

var backoffSteps = []int{5000, 10000, 30000, 60000}

func (e *Engine) poll(ctx context.Context, s *session, agent string, p apitype.ProcessParams) apitype.Result {
	if p.Timeout != nil && *p.Timeout > 0 {
		wait := time.Duration(min(*p.Timeout, 120000)) * time.Millisecond
		t := time.NewTimer(wait)
		select {
		case <-s.ended:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	st, ex, _ := s.snapshot()
	since := st.DrainCursors[agent]
	if p.Since != nil {
		since = cursorArg(*p.Since)
	}
	set := e.conf().Exec(agent)
	if p.Raw == nil || !*p.Raw {
		if text, end, ok := e.screenView(s, since); ok {
			return e.pollResult(s, st, ex, agent, p, since, text, readResult{end: end}, 0, "screen")
		}
	}
	raw := p.Raw != nil && *p.Raw
	out, res, skipped, err := readNewOutput(s, readOpts{since: since, raw: raw, stream: streamOf(p.Stream), outputEnd: outputEndOf(ex)}, set.PendingMaxOutputChars)
	if err != nil {
		return processError(apitype.Errorf(apitype.CodeIOError, "read journal of %s: %v", s.id, err))
	}
	return e.pollResult(s, st, ex, agent, p, since, out, res, skipped, "")
}

// readNewOutput reads a session's output from o.since and returns its
// newest limit chars (a bounded tail of lines, whatever the size of the
// unread output), prefixed with a note when earlier chars were skipped;
// skipped counts them. Lines are folded unless o.raw. poll and wait share
// it.
func readNewOutput(s *session, o readOpts, limit int) (out string, res readResult, skipped int, err error) {
	tail := newLineTail(0, limit+1)
	var f render.Folder
	add := func(l render.Line) { tail.add(l.Text) }
	res, err = readLines(s.journal(), o, func(l render.Line) {
		if o.raw {
			add(l)
			return
		}
		f.Add(l, add)
	})
	f.Flush(add)
	if err != nil {
		return "", res, 0, err
	}
	out = strings.TrimSpace(strings.Join(tail.lines(), "\n"))
	if n := tail.chars - tail.leadingSpace(); n > limit {
		skipped = n - limit
		out = fmt.Sprintf("[… %d earlier chars skipped; use process log since=%d to read them …]\n", skipped, o.since) + render.Tail(out, limit)
	}
	return out, res, skipped, nil
}

// pollResult ends a poll with the text out of the read res: it moves the
// drain cursor and adds the run state. st and ex are
// the session's state taken before the read, so that an end reported
// comes with all the output.
func (e *Engine) pollResult(s *session, st state, ex *proto.Exit, agent string, p apitype.ProcessParams, since int64, out string, res readResult, skipped int, view string) apitype.Result {
	if out == "" {
		out = "(no new output)"
	}
	d := &apitype.PollDetails{
		Status: runStatus(ex), State: "running", SessionID: s.id, Name: st.Name, Cursor: res.end,
		SkippedChars: skipped, SkippedBytes: res.skippedBytes, UnreadableBytes: res.unreadable, View: view,
		OutputLoss: outputLoss(s, ex),
	}
	d.Truncated = d.OutputLoss.Lost() || res.unreadable > 0
	e.journalDamage(s, res)
	hadOutput := res.end > since
	s.update(func(st *state) {
		if st.DrainCursors == nil {
			st.DrainCursors = map[string]int64{}
		}
		if p.Since == nil || res.end > st.DrainCursors[agent] {
			st.DrainCursors[agent] = res.end
		}
		if ex != nil {
			st.ObservedEnd = true
			return
		}
		if hadOutput {
			st.PollBackoff = 0
			d.RetryInMs = backoffSteps[0]
			return
		}
		d.RetryInMs = backoffSteps[min(st.PollBackoff, len(backoffSteps)-1)]
		st.PollBackoff++
	})
	if ex != nil {
		d.State = ex.State
		d.ExitCode, d.Signal, d.KilledBy = ex.ExitCode, ex.Signal, ex.KilledBy
		d.Reason = failureReason(*ex, st.TimeoutSec)
	}
	end := endLine(ex)
	if ex != nil {
		if n := leftoverNote(*ex, st.Backgrounded); n != "" {
			end += "\n" + n
		}
		end += lostNote(*ex)
		if st.Restored != "" {
			end += "\n" + st.Restored
		}
	}
	if a := e.awaiting(s); a != nil {
		end = "Process is awaiting input: " + a.Prompt
		d.AwaitingInput = &apitype.Awaiting{Prompt: a.Prompt, IdleMs: a.IdleMs}
	}
	if ex == nil {
		stat, err := e.liveStatusWithin(s, pollStatusWait)
		switch {
		case err == nil && stat.JournalError != "":
			end += fmt.Sprintf("\nWarning: output is held back because the journal cannot be written (%s); the command waits on its output until there is room again.", stat.JournalError)
		case errors.Is(err, supervisor.ErrNotResponding) && s.running():
			end += "\nWarning: " + notResponding(s, "the output shown is what it recorded so far, and the session's state is unknown until it answers again.")
		}
	}
	return apitype.Result{Text: out + "\n\n" + end, Details: d}
}

func streamOf(s string) journal.Stream {
	switch s {
	case "stdout":
		return journal.Stdout
	case "stderr":
		return journal.Stderr
	}
	return 0
}

func (e *Engine) logAction(s *session, p apitype.ProcessParams) apitype.Result {
	if p.Since != nil && p.Offset != nil {
		return processError(apitype.Errorf(apitype.CodeInvalidArgument, "Use either since or offset, not both."))
	}
	st, ex, _ := s.snapshot()
	since := int64(0)
	if p.Since != nil {
		since = cursorArg(*p.Since)
	}
	if p.Offset == nil && p.Limit == nil && (p.Raw == nil || !*p.Raw) {
		if r, ok := e.logScreen(s, st, ex, since); ok {
			return r
		}
	}
	// A page holds at most budget code points of lines: a forward page
	// (since, offset) stops adding lines once it is spent and says where
	// the next one starts; a tail (the default, limit alone) keeps the
	// last lines that fit. Lines are broken at budget bytes, so one line
	// always fits and a longer one is read in pieces, each ending at a
	// cursor from which the next page continues exactly.
	budget := e.conf().Exec(s.agent).MaxOutputChars
	maxLine := min(budget, render.DefaultMaxLineBytes)
	raw := p.Raw != nil && *p.Raw
	// Without since or a stream filter the journal's line index numbers
	// the lines, and only the window is rendered (linemap.go); a read
	// that does not come out as the index said is done again whole.
	var lm *lineMap
	if p.Since == nil && streamOf(p.Stream) == 0 {
		lm = newLineMap(s.journal(), raw, maxLine, outputEndOf(ex))
	}
	pg, res, err := logRead(s, p, lm, since, raw, maxLine, budget, outputEndOf(ex))
	if errors.Is(err, errLineMap) {
		pg, res, err = logRead(s, p, nil, since, raw, maxLine, budget, outputEndOf(ex))
	}
	if err != nil {
		return processError(apitype.Errorf(apitype.CodeIOError, "read journal of %s: %v", s.id, err))
	}
	cursor, hint := logPageHint(s.id, p, pg, res.end, since, budget)
	text := logText(pg.window, ex)
	info, _ := journal.Stat(s.journal())
	d := &apitype.LogDetails{
		Status: runStatus(ex), State: "running", SessionID: s.id, Name: st.Name, Total: pg.total, TotalLines: pg.total,
		TotalChars: pg.totalChars, DroppedLines: info.DroppedLines, Cursor: cursor,
		SkippedBytes: res.skippedBytes, UnreadableBytes: res.unreadable, More: pg.full, OutputLoss: outputLoss(s, ex),
	}
	d.Truncated = d.OutputLoss.Lost() || res.unreadable > 0
	if ex != nil {
		hint += lostNote(*ex)
	}
	if pg.full && p.Offset != nil {
		next := int(cursorArg(*p.Offset)) + len(pg.window)
		d.NextOffset = &next
	}
	e.journalDamage(s, res)
	if ex != nil {
		d.State = ex.State
		d.ExitCode, d.Signal, d.ExitSignal, d.KilledBy = ex.ExitCode, ex.Signal, ex.Signal, ex.KilledBy
		s.update(func(st *state) { st.ObservedEnd = true })
	}
	return apitype.Result{Text: text + hint, Details: d}
}

// logScreen is log of a terminal session whose output is a screen (a
// full-screen program): the screen, read after since. ok is false when
// the session's output is lines.
func (e *Engine) logScreen(s *session, st state, ex *proto.Exit, since int64) (apitype.Result, bool) {
	text, end, ok := e.screenView(s, since)
	if !ok {
		return apitype.Result{}, false
	}
	info, _ := journal.Stat(s.journal())
	d := &apitype.LogDetails{
		Status: runStatus(ex), State: "running", SessionID: s.id, Name: st.Name,
		DroppedLines: info.DroppedLines, Cursor: end, View: "screen", OutputLoss: outputLoss(s, ex),
	}
	d.Truncated = d.OutputLoss.Lost()
	if ex != nil {
		d.State = ex.State
		d.ExitCode, d.Signal, d.ExitSignal, d.KilledBy = ex.ExitCode, ex.Signal, ex.Signal, ex.KilledBy
		s.update(func(st *state) { st.ObservedEnd = true })
		text += lostNote(*ex)
	}
	return apitype.Result{Text: text, Details: d}, true
}

// logPageHint returns the cursor a log page ends at (end: where the read
// ended) and the hint that says how to read on when the page did not
// show everything asked for.
func logPageHint(id string, p apitype.ProcessParams, pg logPage, end, since int64, budget int) (cursor int64, hint string) {
	num := func(f *float64) int { return int(cursorArg(*f)) }
	window, full, total := pg.window, pg.full, pg.total
	lastN := 0
	switch {
	case p.Since != nil:
	case p.Offset == nil && p.Limit == nil:
		lastN = 200
	case p.Offset == nil:
		lastN = num(p.Limit)
	}
	cursor = end
	switch {
	case p.Since != nil:
		if len(window) < total {
			cursor = since
			if len(window) > 0 {
				cursor = window[len(window)-1].End
			}
		}
		if full {
			hint = fmt.Sprintf("\n\n[page ends at the output budget (%d chars); next page: process log sessionId=%s since=%d]", budget, id, cursor)
		}
	case lastN > 0:
		if len(window) < min(lastN, total) {
			// The budget cut the tail: the rest of the lines asked
			// for are the ones just before it.
			from := max(total-lastN, 0)
			hint = fmt.Sprintf("\n\n[showing last %d of %d lines (output budget %d chars); earlier lines: process log sessionId=%s offset=%d limit=%d]",
				len(window), total, budget, id, from, total-len(window)-from)
		} else if p.Limit == nil && total > 200 {
			hint = fmt.Sprintf("\n\n[showing last 200 of %d lines; pass offset/limit to page]", total)
		}
	case p.Offset == nil:
	default:
		if len(window) > 0 {
			cursor = window[len(window)-1].End
		}
		if full {
			next := num(p.Offset) + len(window)
			more := ""
			if p.Limit != nil {
				more = fmt.Sprintf(" limit=%d", num(p.Limit)-len(window))
			}
			hint = fmt.Sprintf("\n\n[page ends at the output budget (%d chars); next page: process log sessionId=%s offset=%d%s]", budget, id, next, more)
		}
	}
	return cursor, hint
}

// logText is the text of a log page's lines.
func logText(window []render.Line, ex *proto.Exit) string {
	if len(window) == 0 {
		if ex == nil {
			return "(no output yet)"
		}
		return "(no output recorded)"
	}
	texts := make([]string, len(window))
	for i, l := range window {
		texts[i] = l.Text
	}
	return strings.Join(texts, "\n")
}

// liveStatus asks a running session's supervisor for its live state,
// waiting at most supervisor.ReplyTimeout.
func (e *Engine) liveStatus(s *session) (*proto.Status, error) {
	return e.liveStatusWithin(s, supervisor.ReplyTimeout)
}

// liveStatusWithin is liveStatus waiting at most d.
func (e *Engine) liveStatusWithin(s *session, d time.Duration) (*proto.Status, error) {
	rep, err := supervisor.CallWithin(s.socket, proto.Request{Op: "status", Session: s.id}, d)
	if err != nil {
		return nil, err
	}
	return rep.Status, nil
}

// pollStatusWait bounds the status question of a poll or log of a
// running session: what it adds (a journal that cannot be written, a
// supervisor that does not answer) is a warning, and the read itself
// needs no supervisor.
const pollStatusWait = time.Second

// notResponding is the text of a request a session's supervisor did not
// answer (supervisor.ErrNotResponding): what the agent can rely on.
func notResponding(s *session, what string) string {
	s.mu.Lock()
	pid := s.meta.SupervisorPID
	s.mu.Unlock()
	return fmt.Sprintf("Session %s: its supervisor (pid %d) is not responding (stopped, wedged or overloaded); %s", s.id, pid, what)
}

func (e *Engine) input(s *session, p apitype.ProcessParams) apitype.Result {
	stat, res, ok := e.writableStatus(s)
	if !ok {
		return res
	}
	parts, warnings, text, res, ok := encodeInput(s.id, p, stat)
	if !ok {
		return res
	}
	if res, ok := e.sendInput(s, p, parts); !ok {
		return res
	}
	if p.Action == "write" && p.EOF != nil && *p.EOF {
		if _, err := supervisor.Call(s.socket, proto.Request{Op: "closeStdin", Session: s.id}); err != nil {
			return processError(apitype.Errorf(apitype.CodeInvalidState, "Session %s stdin is not writable (%v).", s.id, err))
		}
		text = strings.TrimSuffix(text, ".") + " (stdin closed)."
	}
	if len(warnings) > 0 {
		text += "\nWarnings:\n- " + strings.Join(warnings, "\n- ")
	}
	st, _, cursor := s.snapshot()
	return apitype.Result{Text: text, Details: &apitype.StatusDetails{Status: "running", SessionID: s.id, Name: st.Name, Cursor: &cursor}}
}

// writableStatus is the live status of s when its input can be written
// to; otherwise the result that says why not, and false.
func (e *Engine) writableStatus(s *session) (*proto.Status, apitype.Result, bool) {
	if !s.running() {
		return nil, processError(noActive(s.id)), false
	}
	stat, err := e.liveStatus(s)
	if err != nil {
		if !s.running() {
			return stat, processError(noActive(s.id)), false
		}
		if errors.Is(err, supervisor.ErrNotResponding) {
			return stat, processError(apitype.Errorf(apitype.CodeUnavailable, "%s", notResponding(s, "nothing was sent. Try again later, or kill the session."))), false
		}
		return stat, processError(apitype.Errorf(apitype.CodeUnavailable, "Session %s: supervisor unreachable (%v).", s.id, err)), false
	}
	if stat.Stdin == "closed" {
		msg := fmt.Sprintf("Session %s stdin is not writable.", s.id)
		if s.meta.Stdin == "closed" {
			msg += " (stdin was closed at start; use background:true or pty:true for interactive input)"
		}
		return stat, processError(apitype.Errorf(apitype.CodeInvalidState, "%s", msg)), false
	}
	return stat, apitype.Result{}, true
}

// encodeInput turns an input action (write, send-keys, submit, paste)
// into the bytes to write, in parts (send-keys with a delay writes each
// part on its own), with its warnings and the answer's text; or the
// result that refuses it, and false.
func encodeInput(id string, p apitype.ProcessParams, stat *proto.Status) (parts [][]byte, warnings []string, text string, res apitype.Result, ok bool) {
	pty := stat.Stdin == "pty"
	switch p.Action {
	case "write":
		parts = [][]byte{[]byte(p.Data)}
		text = fmt.Sprintf("Wrote %d bytes to session %s.", len(p.Data), id)
	case "send-keys":
		parts, warnings = keys.Encode(p.Literal, p.Hex, p.Keys, stat.Modes)
		n := 0
		for _, pt := range parts {
			n += len(pt)
		}
		if n == 0 {
			return nil, nil, "", processError(apitype.Errorf(apitype.CodeInvalidArgument, "No key data provided.")), false
		}
		text = fmt.Sprintf("Sent %d bytes to session %s.", n, id)
	case "submit":
		// data first, then the line end: the line the model meant.
		end, name := byte('\n'), "LF"
		if pty {
			end, name = '\r', "CR"
		}
		parts = [][]byte{append([]byte(p.Data), end)}
		if p.Data != "" {
			text = fmt.Sprintf("Submitted session %s (sent %d bytes, then %s).", id, len(p.Data), name)
		} else {
			text = fmt.Sprintf("Submitted session %s (sent %s).", id, name)
		}
	case "paste":
		if p.Text == "" {
			return nil, nil, "", processError(apitype.Errorf(apitype.CodeInvalidArgument, "No paste text provided.")), false
		}
		bracketed := p.Bracketed == nil || *p.Bracketed
		payload, w := keys.Paste(p.Text, bracketed, pty, stat.Modes)
		if w != "" {
			warnings = append(warnings, w)
		}
		parts = [][]byte{payload}
		text = fmt.Sprintf("Pasted %d chars to session %s.", utf8.RuneCountInString(p.Text), id)
	}
	return parts, warnings, text, apitype.Result{}, true
}

// sendInput writes parts to s's input: at once, or with send-keys'
// delay between them; or returns the result that says what went wrong,
// and false.
func (e *Engine) sendInput(s *session, p apitype.ProcessParams, parts [][]byte) (apitype.Result, bool) {
	delay := time.Duration(0)
	if p.DelayMs != nil && p.Action == "send-keys" {
		delay = time.Duration(min(max(*p.DelayMs, 0), 1000)) * time.Millisecond
	}
	if delay == 0 && len(parts) > 1 {
		var all []byte
		for _, pt := range parts {
			all = append(all, pt...)
		}
		parts = [][]byte{all}
	}
	for i, pt := range parts {
		if len(pt) == 0 {
			continue
		}
		if i > 0 && delay > 0 {
			time.Sleep(delay)
		}
		s.mu.Lock()
		s.lastInput = time.Now()
		s.mu.Unlock()
		if _, err := supervisor.Call(s.socket, proto.Request{Op: "write", Session: s.id, Data: pt}); errors.Is(err, supervisor.ErrNotResponding) {
			return processError(apitype.Errorf(apitype.CodeUnavailable, "%s", notResponding(s, "the input may or may not have been written."))), false
		} else if err != nil {
			return processError(apitype.Errorf(apitype.CodeInvalidState, "Session %s stdin is not writable (%v).", s.id, err)), false
		}
	}
	return apitype.Result{}, true
}

func (e *Engine) kill(s *session, operator bool) apitype.Result {
	st, _, _ := s.snapshot()
	if !s.running() {
		return processError(noActive(s.id))
	}
	by := proto.KilledByAgent
	if operator {
		by = proto.KilledByOperator // the agent is told: no AgentEnded
	}
	s.update(func(st *state) { st.AgentEnded = !operator; st.PollBackoff = 0 })
	if err := e.requestKill(s, by); err != nil {
		if errors.Is(err, supervisor.ErrNotResponding) && s.running() {
			// Nothing to wait for: the kill was not delivered (and
			// the agent is told of the end when it comes).
			s.update(func(st *state) { st.AgentEnded = false })
			return apitype.Result{Text: notResponding(s, "the kill was not delivered and the command may still run. Try again."),
				Details: &apitype.StatusDetails{Status: "running", State: "running", SessionID: s.id, Name: st.Name}}
		}
		if s.running() && !supervisor.Alive(s.meta.SupervisorPID, s.meta.SupervisorStartTime) {
			e.markLost(s)
			return apitype.Result{
				Text:    fmt.Sprintf("Unable to terminate session %s: no active supervisor run or process id.", s.id),
				Details: &apitype.StatusDetails{Status: "failed", State: proto.StateLost, SessionID: s.id, Name: st.Name},
			}
		}
	}
	grace := e.conf().Exec(st.Agent).KillGrace + time.Second
	select {
	case <-s.ended:
	case <-time.After(grace):
	}
	_, ex, _ := s.snapshot()
	if ex == nil {
		return apitype.Result{Text: fmt.Sprintf("Termination requested for session %s.", s.id),
			Details: &apitype.StatusDetails{Status: "running", State: "running", KilledBy: string(by), SessionID: s.id, Name: st.Name}}
	}
	if !operator {
		// The agent saw the end in this answer; an operator's kill is
		// news to the agent and keeps its notice.
		s.update(func(st *state) { st.ObservedEnd = true })
	}
	return apitype.Result{Text: fmt.Sprintf("Killed session %s.", s.id) + lostNote(*ex),
		Details: &apitype.StatusDetails{Status: "failed", State: ex.State, KilledBy: deref(ex.KilledBy), Signal: ex.Signal, SessionID: s.id, Name: st.Name}}
}

func (e *Engine) removeAction(s *session, operator bool) apitype.Result {
	st, _, _ := s.snapshot()
	if s.running() {
		s.update(func(st *state) { st.Hidden = true; st.AgentEnded = true })
		if st.Host == "node" && e.opt.Nodes != nil {
			e.opt.Nodes.Removed(s.id)
		}
		by := proto.KilledByAgent
		if operator {
			by = proto.KilledByOperator
		}
		e.killSession(s, by)
		if !s.running() {
			e.forget(s)
			e.removeSession(s)
		}
		return apitype.Result{Text: fmt.Sprintf("Removed session %s (termination requested).", s.id),
			Details: &apitype.StatusDetails{Status: "running", SessionID: s.id, Name: st.Name}}
	}
	e.forget(s)
	e.removeSession(s)
	return apitype.Result{Text: fmt.Sprintf("Removed session %s.", s.id), Details: &apitype.StatusDetails{Status: "completed", SessionID: s.id, Name: st.Name}}
}

type operatorKey struct{}

// AsOperator marks calls made by an operator (control UI, CLI with
// operator rights) acting for an agent: kills are recorded with killedBy
// "operator" and the agent is told of them.
func AsOperator(ctx context.Context) context.Context {
	return context.WithValue(ctx, operatorKey{}, true)
}

func isOperator(ctx context.Context) bool {
	v, _ := ctx.Value(operatorKey{}).(bool)
	return v
}

// cursorArg converts a caller's cursor or line count to an integer in
// [0, apitype.MaxSafe]. apitype rejects values outside that range at the
// boundary; this keeps the engine's arithmetic safe for any caller (a
// float64 beyond int64 converts to an undefined value).
func cursorArg(f float64) int64 {
	if !(f > 0) {
		return 0
	}
	return int64(min(f, apitype.MaxSafe))
}
