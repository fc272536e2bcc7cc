package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/client"
)

// follow reads a session's output the way the gateway's stream route does:
// `log since=<cursor>` at every change of the session, until it ends.
func (l *localBackend) follow(ctx context.Context, id string, o followOpts, fn func(stream, text string)) (sessionEnd, error) {
	since := o.since
	for {
		changed := l.eng.Changed(l.agent, id)
		p := map[string]any{"action": "log", "sessionId": id, "since": float64(since)}
		if o.raw {
			p["raw"] = true
		}
		if o.stream != "" {
			p["stream"] = o.stream
		}
		r, err := l.process(ctx, p)
		if err != nil {
			return sessionEnd{}, err
		}
		var d apitype.LogDetails
		if err := r.Decode(&d); err != nil {
			return sessionEnd{}, err
		}
		events, text := splitEvents(r.Text)
		if d.Cursor <= since || d.TotalLines == 0 {
			text = "" // "(no output yet)"
		}
		if d.More {
			// A page cut by the output budget: its hint is for a
			// model; the next read continues from the cursor.
			if i := strings.LastIndex(text, "\n\n[page ends at the output budget"); i >= 0 {
				text = text[:i]
			}
		}
		if len(events) > 0 {
			text = strings.Join(events, "\n") + "\n\n" + text
		}
		if text != "" {
			fn("both", text)
		}
		since = max(since, d.Cursor)
		if d.More {
			continue
		}
		if d.Status != "running" && d.Status != "pending" {
			return completeEnd(ctx, l, id, sessionEnd{End: client.End{State: d.State, ExitCode: d.ExitCode, Signal: d.Signal}})
		}
		// The change channel wakes us at new output or the end; the timer
		// covers a session replaced while we were reading.
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return sessionEnd{}, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// sessions lists the agent's sessions or, with all, those of every agent
// that has sessions in the home.
func (l *localBackend) sessions(ctx context.Context, all bool) (client.Result, error) {
	if !all {
		return l.process(ctx, map[string]any{"action": "list"})
	}
	agents := map[string]bool{l.agent: true}
	dirs, _ := os.ReadDir(filepath.Join(l.eng.Home(), "sessions"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(l.eng.Home(), "sessions", d.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var m struct {
			Agent string `json:"agent"`
		}
		if json.Unmarshal(b, &m) == nil && m.Agent != "" {
			agents[m.Agent] = true
		}
	}
	list := []client.Session{}
	for a := range agents {
		r := l.eng.Call(ctx, a, "process", json.RawMessage(`{"action":"list"}`))
		d, ok := r.Details.(*apitype.ListDetails)
		if !ok {
			continue
		}
		for _, e := range d.Sessions {
			list = append(list, client.Session{SessionEntry: e, Agent: a})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].StartedAt != list[j].StartedAt {
			return list[i].StartedAt > list[j].StartedAt
		}
		return list[i].SessionID < list[j].SessionID
	})
	det, err := json.Marshal(client.SessionList{Status: "completed", Sessions: list})
	if err != nil {
		return client.Result{}, err
	}
	return client.Result{Text: formatSessions(list, ""), Details: det}, nil
}
