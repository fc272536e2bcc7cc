package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/conchsh/conch/internal/node/hub"
	"github.com/conchsh/conch/internal/node/link"
)

// nodeConnect is GET /v1/nodes/connect: the node link (node/link), served
// by the hub.
func (s *Server) nodeConnect(w http.ResponseWriter, r *http.Request) {
	link.Accept(w, r, s.opt.Nodes.Admit)
}

// nodesHandler serves the operator routes (docs/gateway.md) under
// /v1/nodes (the caller checks operator rights): list, invites, approve,
// rename, remove.
func (s *Server) nodesHandler() http.Handler {
	h := s.opt.Nodes
	m := http.NewServeMux()
	m.HandleFunc("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		o, err := h.Overview()
		if err != nil {
			writeError(w, 500, "io_error", err.Error())
			return
		}
		writeJSON(w, 200, o)
	})
	m.HandleFunc("POST /v1/nodes/invites", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			TTL  any  `json:"ttl"`
			Once bool `json:"once"`
		}
		if b, _ := io.ReadAll(r.Body); len(bytes.TrimSpace(b)) > 0 {
			if err := json.Unmarshal(b, &body); err != nil {
				writeError(w, 400, "invalid_argument", "invalid JSON body: "+err.Error())
				return
			}
		}
		ttl := 24 * time.Hour
		switch v := body.TTL.(type) {
		case string:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				writeError(w, 400, "invalid_argument", "invalid ttl: use a duration such as 24h")
				return
			}
			ttl = d
		case float64:
			if v <= 0 {
				writeError(w, 400, "invalid_argument", "invalid ttl: use a positive number of seconds")
				return
			}
			ttl = time.Duration(v * float64(time.Second))
		}
		inv, err := h.Invite(ttl, body.Once)
		if errors.Is(err, hub.ErrInvalidTTL) {
			writeError(w, 400, "invalid_argument", err.Error())
			return
		}
		if err != nil {
			writeError(w, 500, "io_error", err.Error())
			return
		}
		writeJSON(w, 200, inv)
	})
	m.HandleFunc("POST /v1/nodes/{id}/approve", func(w http.ResponseWriter, r *http.Request) {
		p, err := h.Approve(r.PathValue("id"))
		if err != nil {
			nodesError(w, err)
			return
		}
		p.TokenHash = ""
		writeJSON(w, 200, p)
	})
	m.HandleFunc("PATCH /v1/nodes/{id}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Name string `json:"name"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Name == "" {
			writeError(w, 400, "invalid_argument", "body must be {\"name\": \"…\"}")
			return
		}
		p, err := h.Rename(r.PathValue("id"), body.Name)
		if err != nil {
			nodesError(w, err)
			return
		}
		p.TokenHash = ""
		writeJSON(w, 200, p)
	})
	m.HandleFunc("DELETE /v1/nodes/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := h.Remove(r.PathValue("id"))
		if err != nil {
			nodesError(w, err)
			return
		}
		writeJSON(w, 200, map[string]string{"nodeId": id})
	})
	return m
}

// nodesError answers a failed node operation.
func nodesError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, hub.ErrNotFound):
		writeError(w, 404, "node_unknown", err.Error())
	case errors.Is(err, hub.ErrAmbiguous):
		writeError(w, 409, "node_ambiguous", err.Error())
	case errors.Is(err, hub.ErrNameTaken):
		writeError(w, 409, "conflict", err.Error())
	default:
		writeError(w, 400, "invalid_argument", err.Error())
	}
}
