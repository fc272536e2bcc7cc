package ledger

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Filter selects records for [Tail]. Zero fields select everything.
type Filter struct {
	Since int64  // only records with seq > Since
	Agent string // only records of this agent
	// Session selects the records of one session: those with this sessionId, and the
	// evaluate, request and decision records linked to its exec record by requestId and
	// approvalId.
	Session string
	// Approval selects the records of one approval, by id or slug: those with this
	// approvalId (or slug), the evaluate record sharing their requestId, and the exec and
	// end records of the session it ran in.
	Approval string
}

// links is the set of ids a Session or Approval filter follows.
type links struct {
	requests, approvals, sessions map[string]bool
}

func newLinks() links {
	return links{map[string]bool{}, map[string]bool{}, map[string]bool{}}
}

func (l links) match(m map[string]any) bool {
	return l.requests[str(m, "requestId")] || l.approvals[str(m, "approvalId")] || l.sessions[str(m, "sessionId")]
}

// Tail returns the last n records (all when n <= 0) of the ledger in home that match f,
// oldest first. It reads the whole log and takes no lock; an incomplete last line (an
// append in progress) and lines that do not parse are skipped: use [Verify] to check
// integrity. A home without a ledger has no records.
func Tail(home string, n int, f Filter) ([]Record, error) {
	dir := Dir(home)
	var session, approval links
	if f.Session != "" || f.Approval != "" {
		// First pass: collect the ids linked to the session or approval.
		session, approval = newLinks(), newLinks()
		session.sessions[f.Session] = true
		approval.approvals[f.Approval] = true
		err := each(dir, func(m map[string]any) {
			if f.Session != "" && str(m, "sessionId") == f.Session && str(m, "type") == TypeExec {
				session.requests[str(m, "requestId")] = true
				session.approvals[str(m, "approvalId")] = true
			}
			if f.Approval == "" {
				return
			}
			if str(m, "type") == TypeRequest && (str(m, "approvalId") == f.Approval || str(m, "slug") == f.Approval) {
				approval.approvals[str(m, "approvalId")] = true
				approval.requests[str(m, "requestId")] = true
			}
			if str(m, "type") == TypeExec && approval.approvals[str(m, "approvalId")] {
				approval.sessions[str(m, "sessionId")] = true
			}
		})
		if err != nil {
			return nil, fmt.Errorf("tail ledger: %w", err)
		}
		for _, l := range []links{session, approval} {
			delete(l.requests, "")
			delete(l.approvals, "")
			delete(l.sessions, "")
		}
	}

	var ring []Record
	err := each(dir, func(m map[string]any) {
		if seqOf(m) <= f.Since ||
			f.Agent != "" && str(m, "agent") != f.Agent ||
			f.Session != "" && !session.match(m) ||
			f.Approval != "" && !approval.match(m) {
			return
		}
		if n > 0 && len(ring) == n {
			copy(ring, ring[1:])
			ring = ring[:n-1]
		}
		ring = append(ring, fromMap(m))
	})
	if err != nil {
		return nil, fmt.Errorf("tail ledger: %w", err)
	}
	return ring, nil
}

// each calls fn with every complete, parsable record of the log, in order.
func each(dir string, fn func(map[string]any)) error {
	files, err := listFiles(dir)
	if err != nil {
		return err
	}
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		br := bufio.NewReaderSize(f, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if err == io.EOF {
				break // at most an incomplete line
			}
			if err != nil {
				f.Close()
				return err
			}
			v, err := decode(line)
			if m, ok := v.(map[string]any); err == nil && ok {
				fn(m)
			}
		}
		f.Close()
	}
	return nil
}

// str returns m[k] if it is a string.
func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// String returns the human line of `conch ledger tail`:
// "<ts> #<seq> <type> <agent> <summary>", the summary naming the record's main members.
func (r Record) String() string {
	m, err := fieldsMap(r.Fields)
	if err != nil {
		m = map[string]any{}
	}
	agent := r.Agent
	if agent == "" {
		agent = "-"
	}
	line := fmt.Sprintf("%s #%d %s %s", r.TS.UTC().Format(TimeFormat), r.Seq, r.Type, agent)
	if s := summary(r.Type, m); s != "" {
		line += " " + s
	}
	return line
}

// summary renders the members worth a glance of a record of type typ.
func summary(typ string, m map[string]any) string {
	var parts []string
	add := func(label, key string) {
		v, ok := m[key]
		if !ok || v == nil || v == "" {
			return
		}
		s := fmt.Sprint(v)
		if arr, ok := v.([]any); ok {
			if len(arr) == 0 {
				return
			}
			var items []string
			for _, e := range arr {
				items = append(items, fmt.Sprint(e))
			}
			s = strings.Join(items, " ")
		}
		if label != "" {
			s = label + "=" + s
		}
		parts = append(parts, s)
	}
	switch typ {
	case TypeEvaluate:
		add("", "outcome")
		add("host", "host")
		add("", "command")
	case TypeRequest:
		add("approval", "slug")
		add("request", "requestId")
	case TypeDecision:
		add("", "decision")
		add("by", "decidedBy")
		add("approval", "approvalId")
		add("fallback", "fallback")
		add("persisted", "persisted")
	case TypeExec:
		add("session", "sessionId")
		add("host", "host")
		add("", "argv")
	case TypeEnd:
		add("session", "sessionId")
		add("", "state")
		add("exit", "exitCode")
		add("signal", "signal")
		add("killedBy", "killedBy")
		if o, _ := m["observed"].(bool); o {
			// Written after the fact by a later engine, from the
			// supervisor's files: say so, as the record does.
			parts = append(parts, "(observed after the fact)")
		}
	case TypePolicy:
		add("", "file")
		add("by", "by")
		add("new", "newHash")
	case TypeNode:
		add("", "action")
		add("node", "nodeId")
		add("name", "name")
		add("by", "by")
	case TypeGap:
		if u, _ := m["unknown"].(bool); u {
			m["dropped"] = "unknown"
		}
		add("dropped", "dropped")
		add("from", "firstTs")
		add("to", "lastTs")
		add("reason", "reason")
	case TypePatch:
		add("host", "host")
		add("session", "sessionId")
		add("patch", "patchSha256")
	}
	return strings.Join(parts, " ")
}
