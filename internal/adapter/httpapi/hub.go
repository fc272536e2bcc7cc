package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
)

// hubEvent is one numbered event.
type hubEvent struct {
	ID    int64
	Type  string
	Agent string // "" = operators only
	Data  json.RawMessage
}

// Hub numbers engine events and fans them out to SSE subscribers, keeping
// the last ones for Last-Event-ID resumption.
type Hub struct {
	mu   sync.Mutex // guards everything below
	seq  int64
	ring []hubEvent
	max  int
	subs map[chan hubEvent]struct{}
}

// NewHub returns a hub keeping the last max events.
func NewHub(max int) *Hub { return &Hub{max: max, subs: map[chan hubEvent]struct{}{}} }

// Publish numbers and delivers an event. A subscriber that cannot keep up
// is disconnected; it resumes with Last-Event-ID.
func (h *Hub) Publish(ev engine.Event) {
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	he := hubEvent{ID: h.seq, Type: ev.Type, Agent: ev.Agent, Data: data}
	h.ring = append(h.ring, he)
	if len(h.ring) > h.max {
		h.ring = h.ring[len(h.ring)-h.max:]
	}
	for ch := range h.subs {
		select {
		case ch <- he:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// subscribe returns the kept events after since and a channel of new ones.
func (h *Hub) subscribe(since int64) ([]hubEvent, chan hubEvent, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var replay []hubEvent
	for _, e := range h.ring {
		if e.ID > since {
			replay = append(replay, e)
		}
	}
	ch := make(chan hubEvent, 256)
	h.subs[ch] = struct{}{}
	return replay, ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// serveEvents is GET /v1/events.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r.Context())
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming unsupported")
		return
	}
	types := map[string]bool{}
	for _, t := range strings.Split(r.URL.Query().Get("types"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			types[t] = true
		}
	}
	since, perr := apitype.ParseQuery("since", r.Header.Get("Last-Event-ID"))
	if perr != nil {
		writeError(w, http.StatusBadRequest, perr.Code, perr.Message)
		return
	}
	replay, ch, cancel := s.hub.subscribe(since)
	defer cancel()
	visible := func(e hubEvent) bool {
		if len(types) > 0 && !types[e.Type] {
			return false
		}
		if id.operator && r.Header.Get("X-Conch-Agent") == "" {
			return true
		}
		return e.Agent != "" && e.Agent == id.agent
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	write := func(e hubEvent) error {
		_, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, e.Data)
		return err
	}
	for _, e := range replay {
		if visible(e) {
			write(e)
		}
	}
	fl.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			fl.Flush()
		case e, ok := <-ch:
			if !ok {
				return
			}
			if visible(e) {
				if write(e) != nil {
					return
				}
				fl.Flush()
			}
		}
	}
}
