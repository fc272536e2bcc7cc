package hub

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/node/link"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// Everything a node sends is input. Its frames are checked here, in one
// place, before any of it reaches a mirror, a session's files or an
// answer: the frame itself (checkFrame), each event (checkOutput,
// checkFinished) and each response by the method it answers
// (checkReply). A frame that fails is dropped (an event) or turned into
// an error of the call it answers (a response); an end state that fails
// ends its session as lost, with the reason.

// Bounds of node input.
const (
	maxToken  = 128     // frame, run and plan ids; codes
	maxReason = 4096    // reasons and error messages
	maxPath   = 4096    // paths
	maxText   = 1 << 20 // command texts, patch answers
	maxOutput = 64 << 10
	maxCursor = 1 << 53
	maxPID    = 1 << 22
	maxMs     = 100 * 365 * 24 * 3600 * 1000 // a duration of 100 years
)

var (
	tokenRE     = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	sessionIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)
	methodRE    = regexp.MustCompile(`^[a-z][A-Za-z0-9.]{0,63}$`)
	signalRE    = regexp.MustCompile(`^SIG[A-Z0-9+-]{1,12}$`)
	sha256RE    = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// endStates are the end states a session may report.
var endStates = map[string]bool{
	proto.StateExited: true, proto.StateSignaled: true, proto.StateKilled: true,
	proto.StateLost: true, proto.StateDenied: true,
}

// inputError names the field of node input that failed.
type inputError struct{ field, msg string }

func (e *inputError) Error() string { return e.field + ": " + e.msg }

func bad(field, format string, args ...any) error {
	return &inputError{field: field, msg: fmt.Sprintf(format, args...)}
}

// text checks a string: valid UTF-8, at most max bytes, no control
// characters (but newlines and tabs where multiline).
func text(field, s string, max int, multiline bool) error {
	if len(s) > max {
		return bad(field, "longer than %d bytes", max)
	}
	if !utf8.ValidString(s) {
		return bad(field, "not UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t' || r == '\r')) {
			return bad(field, "control character %U", r)
		}
	}
	return nil
}

func match(field string, re *regexp.Regexp, s string) error {
	if !re.MatchString(s) {
		if len(s) > 64 {
			s = s[:64] + "…"
		}
		return bad(field, "malformed %q", s)
	}
	return nil
}

func between(field string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return bad(field, "%d out of range [%d, %d]", v, lo, hi)
	}
	return nil
}

func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkFrame checks the envelope of a text frame.
func checkFrame(f *apitype.Frame) error {
	switch f.Type {
	case "req", "res":
		if err := match("id", tokenRE, f.ID); err != nil {
			return err
		}
	case "event":
		if f.ID != "" {
			if err := match("id", tokenRE, f.ID); err != nil {
				return err
			}
		}
	default:
		return bad("type", "unknown frame type %q", truncate(f.Type, 32))
	}
	if f.Method != "" {
		if err := match("method", methodRE, f.Method); err != nil {
			return err
		}
	}
	if f.Type == "event" || f.Event != "" {
		if err := match("event", methodRE, f.Event); err != nil {
			return err
		}
	}
	return checkError("error", f.Error)
}

func checkError(field string, e *apitype.Error) error {
	if e == nil {
		return nil
	}
	return first(match(field+".code", tokenRE, e.Code), text(field+".message", e.Message, maxReason, true))
}

// checkOutput checks an exec.output event (either form).
func checkOutput(o apitype.NodeOutput) error {
	return first(
		match("sessionId", sessionIDRE, o.SessionID),
		optional("runId", tokenRE, o.RunID),
		oneOf("stream", o.Stream, "stdout", "stderr"),
		between("data", int64(len(o.Data)), 0, link.MaxFrame),
		between("cursor", o.Cursor, int64(len(o.Data)), maxCursor),
		ranges(&o),
	)
}

// killedBy checks a kill's cause against the closed set of causes.
func killedBy(field, v string) error {
	if proto.KilledBy(v).Valid() {
		return nil
	}
	var all []string
	for _, k := range proto.KilledByAll {
		all = append(all, string(k))
	}
	return bad(field, "%q is not one of %s", truncate(v, 32), strings.Join(all, ", "))
}

func killedByOrEmpty(field, v string) error {
	if v == "" {
		return nil
	}
	return killedBy(field, v)
}

// ranges applies the range tags the protocol's structs declare (after
// the checks above, which name the field more precisely).
func ranges(v any) error {
	if e := apitype.CheckRanges(v, ""); e != nil {
		return bad("range", "%s", e.Message)
	}
	return nil
}

func optional(field string, re *regexp.Regexp, s string) error {
	if s == "" {
		return nil
	}
	return match(field, re, s)
}

func oneOf(field, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return bad(field, "%q is not one of %s", truncate(v, 32), strings.Join(allowed, ", "))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// checkFinished checks an exec.finished event and returns the end state
// to record: the node's exit.json record when it sent one, else the
// event's own fields.
func checkFinished(f apitype.NodeFinished) (ex proto.Exit, err error) {
	err = first(
		match("sessionId", sessionIDRE, f.SessionID),
		optional("runId", tokenRE, f.RunID),
		oneOf("host", f.Host, "", "node"),
		// The command and its output tail are the node's own text (the
		// gateway keeps its own): bounded, any characters.
		between("command", int64(len(f.Command)), 0, maxText),
		between("output", int64(len(f.Output)), 0, maxOutput),
		between("cursor", f.Cursor, 0, maxCursor),
	)
	if err != nil {
		return ex, err
	}
	defer func() {
		if err == nil {
			err = ranges(&f)
		}
	}()
	top := proto.Exit{State: f.State, ExitCode: f.ExitCode, Signal: f.Signal, KilledBy: f.KilledBy, TimedOut: f.TimedOut, EndedAt: time.Now().UnixMilli()}
	if err := checkExit("", top); err != nil {
		return ex, err
	}
	ex = top
	if len(f.Exit) > 0 && string(f.Exit) != "null" {
		var rec proto.Exit
		if err := json.Unmarshal(f.Exit, &rec); err != nil {
			return ex, bad("exit", "not an exit record: %v", err)
		}
		if err := checkExit("exit.", rec); err != nil {
			return ex, err
		}
		if rec.EndedAt == 0 {
			rec.EndedAt = top.EndedAt
		}
		ex = rec
	}
	return ex, nil
}

// checkExit checks an end-state record: a state of the allowed set,
// fields that agree with it, a bounded reason, numbers in range.
func checkExit(prefix string, ex proto.Exit) error {
	if err := oneOf(prefix+"state", ex.State, proto.StateExited, proto.StateSignaled, proto.StateKilled, proto.StateLost, proto.StateDenied); err != nil {
		return err
	}
	if ex.ExitCode != nil {
		if err := between(prefix+"exitCode", int64(*ex.ExitCode), -1, 255); err != nil {
			return err
		}
	} else if ex.State == proto.StateExited {
		return bad(prefix+"exitCode", "missing for state exited")
	}
	if ex.Signal != nil {
		if err := match(prefix+"signal", signalRE, *ex.Signal); err != nil {
			return err
		}
	} else if ex.State == proto.StateSignaled {
		return bad(prefix+"signal", "missing for state signaled")
	}
	if ex.KilledBy != nil {
		if err := killedBy(prefix+"killedBy", *ex.KilledBy); err != nil {
			return err
		}
	}
	if ex.OutputSha256 != "" {
		if err := match(prefix+"outputSha256", sha256RE, ex.OutputSha256); err != nil {
			return err
		}
	}
	return first(
		text(prefix+"reason", ex.Reason, maxReason, true),
		between(prefix+"endedAt", ex.EndedAt, 0, time.Now().Add(24*time.Hour).UnixMilli()),
		between(prefix+"durationMs", ex.DurationMs, 0, maxMs),
		between(prefix+"descendantsKilled", int64(ex.DescendantsKilled), 0, 1<<20),
		between(prefix+"outputBytes", ex.OutputBytes, 0, maxCursor),
		between(prefix+"droppedBytes", ex.DroppedBytes, 0, maxCursor),
	)
}

// checkReply checks the payload of a response to method.
func checkReply(method string, b json.RawMessage) error {
	switch {
	case method == "system.run.prepare":
		var rep apitype.NodePrepareReply
		if err := json.Unmarshal(b, &rep); err != nil {
			return bad("payload", "%v", err)
		}
		return checkPrepare(rep)
	case method == "system.run":
		var rep apitype.NodeRunReply
		if err := json.Unmarshal(b, &rep); err != nil {
			return bad("payload", "%v", err)
		}
		return first(
			optional("sessionId", sessionIDRE, rep.SessionID),
			between("pid", int64(rep.PID), 0, maxPID),
			text("cwd", rep.Cwd, maxPath, false),
			ranges(&rep),
		)
	case strings.HasPrefix(method, "system.session."):
		var rep proto.Reply
		if err := json.Unmarshal(b, &rep); err != nil {
			return bad("payload", "%v", err)
		}
		err := first(
			text("error", rep.Error, maxReason, true),
			between("pid", int64(rep.PID), 0, maxPID),
			between("cursor", rep.Cursor, 0, maxCursor),
			between("bytes", rep.Bytes, 0, maxCursor),
		)
		if err == nil && rep.Status != nil {
			s := rep.Status
			err = first(
				between("status.pid", int64(s.PID), 0, maxPID),
				between("status.cursor", s.Cursor, 0, maxCursor),
				oneOf("status.stdin", s.Stdin, "", "open", "closed", "pty"),
				killedByOrEmpty("status.killedBy", s.KilledBy),
				between("status.lastOutputNs", s.LastOutputNs, 0, maxCursor*1000),
				text("status.journalError", s.JournalError, maxReason, true),
			)
		}
		return err
	case method == "system.patch.apply":
		var rep struct {
			Text    string          `json:"text"`
			Details json.RawMessage `json:"details"`
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			return bad("payload", "%v", err)
		}
		return text("text", rep.Text, maxText, true)
	case method == "system.execApprovals.get":
		var rep apitype.NodeApprovalsFile
		if err := json.Unmarshal(b, &rep); err != nil {
			return bad("payload", "%v", err)
		}
		return first(text("path", rep.Path, maxPath, false), optional("hash", tokenRE, rep.Hash))
	case method == "system.execApprovals.set":
		var rep struct {
			Hash string `json:"hash"`
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			return bad("payload", "%v", err)
		}
		return optional("hash", tokenRE, rep.Hash)
	case method == "system.which":
		var rep struct {
			Paths map[string]*string `json:"paths"`
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			return bad("payload", "%v", err)
		}
		if len(rep.Paths) > 4096 {
			return bad("paths", "more than 4096 entries")
		}
		for k, v := range rep.Paths {
			if err := text("paths", k, maxPath, false); err != nil {
				return err
			}
			if v != nil {
				if err := text("paths["+truncate(k, 32)+"]", *v, maxPath, false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkPrepare(rep apitype.NodePrepareReply) error {
	p := rep.Plan
	err := first(
		match("planId", tokenRE, rep.PlanID),
		text("cmdText", rep.CmdText, maxText, true),
		optional("planHash", tokenRE, rep.PlanHash),
		text("verdict.reason", rep.Verdict.Reason, maxReason, true),
		between("verdict.segments", int64(len(rep.Verdict.Segments)), 0, 4096),
		optional("plan.planId", tokenRE, p.PlanID),
		text("plan.rawCommand", p.RawCommand, maxText, true),
		text("plan.cwd", p.Cwd, maxPath, false),
		between("plan.exes", int64(len(p.Exes)), 0, 4096),
		between("plan.expiresAtMs", p.ExpiresAtMs, 0, maxCursor),
		ranges(&p),
	)
	if err != nil {
		return err
	}
	for i, s := range rep.Verdict.Segments {
		if err := text(fmt.Sprintf("verdict.segments[%d]", i), s, maxText, true); err != nil {
			return err
		}
	}
	exes := p.Exes
	if p.Script != nil {
		exes = append(exes[:len(exes):len(exes)], *p.Script)
	}
	for i, x := range exes {
		if err := first(text(fmt.Sprintf("plan.exes[%d].path", i), x.Path, maxPath, false),
			optional(fmt.Sprintf("plan.exes[%d].sha256", i), sha256RE, x.SHA256)); err != nil {
			return err
		}
	}
	return nil
}

// checkHello refuses oversized node.hello fields and strips control
// characters from the ones operators read (names reach terminals).
func checkHello(h *apitype.NodeHello) string {
	clean := func(s string, max int) (string, bool) {
		if len(s) > max {
			return "", false
		}
		return strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return -1
			}
			return r
		}, s), true
	}
	var ok bool
	for _, f := range []*string{&h.Name, &h.Platform, &h.Arch, &h.Version} {
		if *f, ok = clean(*f, 256); !ok {
			return "node.hello field too long"
		}
	}
	if len(h.Caps) > 64 {
		return "node.hello has too many caps"
	}
	for i := range h.Caps {
		if h.Caps[i], ok = clean(h.Caps[i], 128); !ok {
			return "node.hello cap too long"
		}
	}
	return ""
}
