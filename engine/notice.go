package engine

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/term/render"
)

// endWord is the <end> of an exit notice: code N, signal SIG, killed by
// WHO, lost.
func endWord(ex proto.Exit) string {
	switch ex.State {
	case proto.StateExited:
		return fmt.Sprintf("code %d", *ex.ExitCode)
	case proto.StateSignaled:
		return "signal " + deref(ex.Signal)
	case proto.StateKilled:
		return "killed by " + deref(ex.KilledBy)
	}
	return ex.State
}

// queueExitNotice queues the exit notice of a backgrounded session for its
// agent, at most once per session.
func (e *Engine) queueExitNotice(s *session, ex proto.Exit) {
	s.mu.Lock()
	st := s.st
	if st.Notice.Queued || st.AgentEnded || st.ObservedEnd || st.Hidden {
		s.mu.Unlock()
		return
	}
	s.st.Notice.Queued = true
	s.saveLocked()
	s.mu.Unlock()
	set := e.conf().Exec(st.Agent)
	if !set.NotifyOnExit {
		return
	}
	ok := ex.State == proto.StateExited && *ex.ExitCode == 0
	tail, _ := e.tail(s, 400)
	snippet := render.Snippet(tail)
	if ok && snippet == "" && !set.NotifyOnExitEmptySuccess {
		return
	}
	kind := "completed"
	if !ok {
		kind = "failed"
	}
	text := fmt.Sprintf("Exec %s (%s, %s)", kind, s.id, endWord(ex))
	if snippet != "" {
		text += " :: " + snippet
	}
	e.queueNotice(s, apitype.Notice{Kind: kind, Text: text, SessionID: s.id})
}

// queueNotice queues an event for the session's agent: inline in its next
// tool result (unless mcp.inlineEvents is false) and pushed through
// Options.Notify at once.
func (e *Engine) queueNotice(s *session, n apitype.Notice) {
	if e.conf().InlineEvents() {
		e.mu.Lock()
		e.notices[s.agent] = append(e.notices[s.agent], queuedNotice{Notice: n, sess: s})
		e.mu.Unlock()
	}
	if e.opt.Notify != nil {
		e.opt.Notify(s.agent, n)
	}
	e.emit("exec.notice", s.agent, n)
}

// eventsMax is the most code points of inline events in one result, and
// eventLineMax of one event: a result's text stays within its bound
// (bound.go) with the events in front of it.
const (
	eventsMax    = 1000
	eventLineMax = 300
)

// withNotices prefixes a result's text with the agent's undelivered
// events, dropping those whose end the agent has already
// observed.
func (e *Engine) withNotices(agent string, r apitype.Result) apitype.Result {
	if !e.conf().InlineEvents() {
		return r
	}
	e.mu.Lock()
	q := e.notices[agent]
	delete(e.notices, agent)
	e.mu.Unlock()
	var lines []string
	used := 0 // code points of lines
	for i, n := range q {
		st, _, _ := n.sess.snapshot()
		if st.ObservedEnd && (n.Kind == "completed" || n.Kind == "failed") {
			continue
		}
		// One line per event: a multi-line text (Exec finished + its
		// snippet) is folded, and a long one (a quoted command) cut.
		line := "[conch event] " + render.CutLine(strings.ReplaceAll(n.Text, "\n", " :: "), eventLineMax)
		k := utf8.RuneCountInString(line) + 1
		if len(lines) > 0 && used+k > eventsMax {
			// The rest wait for the next result, ahead of newer ones.
			e.mu.Lock()
			e.notices[agent] = append(append([]queuedNotice(nil), q[i:]...), e.notices[agent]...)
			e.mu.Unlock()
			lines = append(lines, fmt.Sprintf("[conch event] Up to %d more events follow in the next results.", len(q)-i))
			break
		}
		used += k
		n.sess.update(func(st *state) { st.Notice.Delivered = true })
		lines = append(lines, line)
	}
	if len(lines) > 0 {
		r.Text = strings.Join(lines, "\n") + "\n\n" + r.Text
	}
	return r
}

// deriveName is a session's name: the command's words, flags and their
// values kept (a verb and one target named `vim -u NONE -N f` "vim
// NONE"), middle-truncated.
func deriveName(command string) string {
	return render.MiddleTruncate(strings.Join(splitWords(command), " "), nameMax)
}

// nameMax is the longest session name, in code points.
const nameMax = 64

// splitWords splits on whitespace honouring "…" and '…', dropping the
// quotes.
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	in := false
	var quote rune
	has := false
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, has = r, true
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			if in || has {
				out = append(out, cur.String())
				cur.Reset()
				in, has = false, false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in || has {
		out = append(out, cur.String())
	}
	return out
}

// compactDuration formats a runtime as 500ms, 45s, 2m5s, 1h30m, 2d3h; n/a
// when d <= 0.
func compactDuration(d time.Duration) string {
	if d <= 0 {
		return "n/a"
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		m := int(d.Minutes())
		sec := int(d.Seconds()) - 60*m
		if sec == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%ds", m, sec)
	case d < 24*time.Hour:
		h := int(d.Hours())
		m := int(d.Minutes()) - 60*h
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	days := int(d.Hours()) / 24
	h := int(d.Hours()) - 24*days
	if h == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%dh", days, h)
}
