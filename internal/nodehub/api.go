package nodehub

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"time"
)

// Handler serves the operator routes of interfaces.md §3 under /v1/nodes
// (the caller checks operator rights): list, invites, approve, rename,
// remove.
func (h *Hub) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		list, err := h.List()
		if err != nil {
			writeErr(w, 500, "io_error", err.Error())
			return
		}
		paired, pending := []Node{}, []Node{}
		for _, n := range list {
			if n.Status == "pending" {
				pending = append(pending, n)
			} else {
				paired = append(paired, n)
			}
		}
		writeJSON(w, 200, map[string]any{"nodes": list, "paired": paired, "pending": pending, "connected": h.Connected()})
	})
	m.HandleFunc("POST /v1/nodes/invites", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			TTL  any  `json:"ttl"`
			Once bool `json:"once"`
		}
		if b, _ := io.ReadAll(r.Body); len(bytes.TrimSpace(b)) > 0 {
			if err := json.Unmarshal(b, &body); err != nil {
				writeErr(w, 400, "invalid_argument", "invalid JSON body: "+err.Error())
				return
			}
		}
		ttl := 24 * time.Hour
		switch v := body.TTL.(type) {
		case string:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				writeErr(w, 400, "invalid_argument", "invalid ttl: use a duration such as 24h")
				return
			}
			ttl = d
		case float64:
			if v <= 0 {
				writeErr(w, 400, "invalid_argument", "invalid ttl: use a positive number of seconds")
				return
			}
			ttl = time.Duration(v * float64(time.Second))
		}
		tok, exp, err := h.store.CreateInvite(ttl, body.Once)
		if err != nil {
			writeErr(w, 500, "io_error", err.Error())
			return
		}
		writeJSON(w, 200, map[string]any{"token": tok, "expiresAtMs": exp, "once": body.Once})
	})
	m.HandleFunc("POST /v1/nodes/{id}/approve", func(w http.ResponseWriter, r *http.Request) {
		p, err := h.Approve(r.PathValue("id"))
		if err != nil {
			opErr(w, err)
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
			writeErr(w, 400, "invalid_argument", "body must be {\"name\": \"…\"}")
			return
		}
		p, err := h.Rename(r.PathValue("id"), body.Name)
		if err != nil {
			opErr(w, err)
			return
		}
		p.TokenHash = ""
		writeJSON(w, 200, p)
	})
	m.HandleFunc("DELETE /v1/nodes/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := h.Remove(r.PathValue("id"))
		if err != nil {
			opErr(w, err)
			return
		}
		writeJSON(w, 200, map[string]string{"nodeId": id})
	})
	return m
}

func opErr(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		writeErr(w, 404, "node_unknown", err.Error())
	case errors.Is(err, ErrAmbiguous):
		writeErr(w, 409, "node_ambiguous", err.Error())
	case errors.Is(err, ErrNameTaken):
		writeErr(w, 409, "conflict", err.Error())
	default:
		writeErr(w, 400, "invalid_argument", err.Error())
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// LocalAPI runs one request of Handler in-process (the CLI when no
// gateway runs) and returns the body, the status and, for failures, the
// error message.
func LocalAPI(h *Hub, method, path string, body any) (json.RawMessage, int, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req := httptest.NewRequest(method, path, rd)
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, req)
	b := rec.Body.Bytes()
	if rec.Code >= 300 {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		return nil, rec.Code, errors.New(e.Error.Message)
	}
	return b, rec.Code, nil
}
