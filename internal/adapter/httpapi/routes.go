package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/admin"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/internal/store/auth"
	"github.com/conchsh/conch/internal/store/ledger"
)

func (s *Server) routes() {
	m := http.NewServeMux()
	s.mux = m
	m.HandleFunc("GET /v1/health", s.health)
	m.HandleFunc("GET /metrics", s.metrics)
	m.HandleFunc("POST /v1/exec", s.tool("exec"))
	m.HandleFunc("POST /v1/proxies/{id}/stop", s.operator(s.stopProxy))
	m.HandleFunc("POST /v1/process", s.tool("process"))
	m.HandleFunc("POST /v1/apply_patch", s.tool("apply_patch"))
	m.HandleFunc("GET /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query().Get("all"); (q == "true" || q == "1") && identityOf(r.Context()).operator {
			writeResult(w, s.eng.ListAll())
			return
		}
		s.action(w, r, map[string]any{"action": "list"})
	})
	m.HandleFunc("GET /v1/sessions/{id}", s.sessionEntry)
	m.HandleFunc("POST /v1/sessions/{id}/poll", s.sessionAction("poll", "since", "timeout", "raw", "stream"))
	m.HandleFunc("GET /v1/sessions/{id}/log", s.sessionAction("log", "offset", "limit", "since", "raw", "stream"))
	m.HandleFunc("GET /v1/sessions/{id}/search", s.sessionAction("search", "pattern", "ignoreCase", "context", "max", "since", "stream"))
	m.HandleFunc("GET /v1/sessions/{id}/screen", s.sessionAction("screen"))
	m.HandleFunc("POST /v1/sessions/{id}/wait", s.sessionAction("wait", "until", "pattern", "ignoreCase", "since", "host", "port", "url", "path", "idleMs", "timeout"))
	m.HandleFunc("POST /v1/sessions/{id}/input", s.input)
	m.HandleFunc("POST /v1/sessions/{id}/submit", s.sessionAction("submit"))
	m.HandleFunc("POST /v1/sessions/{id}/paste", s.sessionAction("paste", "text", "bracketed"))
	m.HandleFunc("POST /v1/sessions/{id}/kill", s.sessionAction("kill"))
	m.HandleFunc("POST /v1/sessions/{id}/clear", s.sessionAction("clear"))
	m.HandleFunc("DELETE /v1/sessions/{id}", s.sessionAction("remove"))
	m.HandleFunc("GET /v1/sessions/{id}/stream", s.stream)
	m.HandleFunc("GET /v1/sessions/{id}/recording", s.recording)
	m.HandleFunc("GET /v1/events", s.serveEvents)

	m.HandleFunc("GET /v1/approvals", s.operator(s.listApprovals))
	m.HandleFunc("GET /v1/approvals/{id}", s.getApproval)
	m.HandleFunc("POST /v1/approvals/{id}/decision", s.operator(s.decide))
	m.HandleFunc("GET /v1/approvals-file", s.operator(s.getApprovalsFile))
	m.HandleFunc("PUT /v1/approvals-file", s.operator(s.putApprovalsFile))
	m.HandleFunc("POST /v1/policy/explain", s.operator(s.explain))
	m.HandleFunc("GET /v1/ledger", s.operator(s.ledgerTail))
	m.HandleFunc("POST /v1/ledger/verify", s.operator(s.ledgerVerify))
	m.HandleFunc("GET /v1/agents", s.operator(s.listAgents))
	m.HandleFunc("POST /v1/agents", s.operator(s.addAgent))
	m.HandleFunc("DELETE /v1/agents/{id}", s.operator(s.removeAgent))
	m.HandleFunc("POST /v1/agents/{id}/token", s.operator(s.rotateAgent))
	m.HandleFunc("GET /v1/agents/{id}/exec-defaults", s.operator(s.getDefaults))
	m.HandleFunc("PUT /v1/agents/{id}/exec-defaults", s.operator(s.putDefaults))
	m.HandleFunc("DELETE /v1/agents/{id}/exec-defaults", s.operator(s.deleteDefaults))
	m.HandleFunc("POST /v1/config/reload", s.operator(s.reload))
	m.HandleFunc("GET /v1/doctor", s.operator(s.doctor))
	if s.opt.UI {
		m.HandleFunc("POST /v1/ui/login-code", s.operator(s.uiLoginCode))
		m.HandleFunc("POST /v1/ui/session", s.uiSessionCreate)
		m.HandleFunc("GET /v1/ui/session", s.uiSessionGet)
		m.HandleFunc("DELETE /v1/ui/session", s.uiSessionDelete)
	} else {
		m.HandleFunc("/v1/ui/", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotFound, "not_found", "the control UI is disabled on this gateway (conch serve --no-ui, or server.ui false)")
		})
	}
	m.HandleFunc("GET /v1/sandbox", s.operator(s.sandboxStatus))
	m.HandleFunc("POST /v1/sandbox/recreate", s.operator(s.sandboxRecreate))
	m.HandleFunc("POST /v1/sandbox/prune", s.operator(s.sandboxPrune))
	if s.opt.Nodes != nil {
		nh := s.nodesHandler()
		m.Handle("/v1/nodes", s.operator(nh.ServeHTTP))
		m.Handle("/v1/nodes/", s.operator(nh.ServeHTTP))
	} else {
		for _, p := range []string{"/v1/nodes", "/v1/nodes/"} {
			m.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusServiceUnavailable, "unavailable", "node hosts are served by conch serve")
			})
		}
	}
	for _, p := range []string{"/v1/approvals-file/import"} {
		m.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "not available in this build of conch")
		})
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no route for "+r.Method+" "+r.URL.Path)
	})
}

// health is GET /v1/health.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	// A full or unwritable home is a degraded state, not a dead
	// gateway: the answer stays 200 (it serves running sessions) and
	// says what is wrong (disk.code, disk.reason).
	disk := s.eng.DiskStatus()
	status := "ok"
	if disk.Refusing() {
		status = "degraded"
	}
	writeJSON(w, 200, map[string]any{"ok": true, "status": status, "disk": disk, "version": s.opt.Version, "uptimeMs": time.Since(s.started).Milliseconds()})
}

// metrics is GET /metrics: the operator or the metrics scraper.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if id := identityOf(r.Context()); !id.operator && !id.metrics {
		writeError(w, http.StatusForbidden, "forbidden", "operator or metrics credentials required")
		return
	}
	s.metricsH.ServeHTTP(w, r)
}

// reload is POST /v1/config/reload.
func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if err := s.eng.Reload(); err != nil {
		writeError(w, 400, "invalid_argument", err.Error())
		return
	}
	writeJSON(w, 200, map[string]any{"ok": true})
}

// doctor is GET /v1/doctor.
func (s *Server) doctor(w http.ResponseWriter, r *http.Request) {
	f := admin.Doctor(s.opt.Home)
	if f == nil {
		f = []admin.Finding{}
	}
	writeJSON(w, 200, map[string]any{"findings": f})
}

// sandboxStatus is GET /v1/sandbox.
func (s *Server) sandboxStatus(w http.ResponseWriter, r *http.Request) {
	st, err := admin.SandboxStatusOf(r.Context(), s.opt.Home)
	if err != nil {
		writeError(w, 400, "invalid_argument", err.Error())
		return
	}
	writeJSON(w, 200, st)
}

// sandboxRecreate is POST /v1/sandbox/recreate.
func (s *Server) sandboxRecreate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Agent string `json:"agent"`
		All   bool   `json:"all"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || (req.Agent == "") == !req.All {
		writeError(w, 400, "invalid_argument", "want {\"agent\": ID} or {\"all\": true}")
		return
	}
	removed, err := admin.SandboxRecreate(r.Context(), s.opt.Home, req.Agent, req.All)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "sandbox_unavailable", err.Error())
		return
	}
	writeJSON(w, 200, map[string]any{"removed": removed})
}

// sandboxPrune is POST /v1/sandbox/prune.
func (s *Server) sandboxPrune(w http.ResponseWriter, r *http.Request) {
	removed, err := admin.SandboxPrune(r.Context(), s.opt.Home)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "sandbox_unavailable", err.Error())
		return
	}
	writeJSON(w, 200, map[string]any{"removed": removed})
}

// actor names the operator credential of r for decidedBy and the ledger:
// "ui:operator" for the control-UI cookie, else "api:operator".
func actor(r *http.Request) string {
	if identityOf(r.Context()).cookie {
		return "ui:operator"
	}
	return "api:operator"
}

// operator restricts a handler to operator credentials.
func (s *Server) operator(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !identityOf(r.Context()).operator {
			writeError(w, http.StatusForbidden, "forbidden", "operator credentials required")
			return
		}
		h(w, r)
	}
}

func readBody(w http.ResponseWriter, r *http.Request) (json.RawMessage, bool) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_argument", fmt.Sprintf("request body larger than %d bytes", mb.Limit))
		} else {
			writeError(w, http.StatusBadRequest, "invalid_argument", "read body: "+err.Error())
		}
		return nil, false
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		b = []byte("{}")
	}
	if !json.Valid(b) {
		writeError(w, http.StatusBadRequest, "invalid_argument", "request body is not valid JSON")
		return nil, false
	}
	return b, true
}

// tool serves POST /v1/exec, /v1/process and /v1/apply_patch.
func (s *Server) tool(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		id := identityOf(r.Context())
		res := s.eng.Call(r.Context(), id.agent, name, body)
		if code := errorCode(res); code == "rate_limited" {
			w.Header().Set("Retry-After", "1")
		}
		writeResult(w, res)
	}
}

func (s *Server) action(w http.ResponseWriter, r *http.Request, params map[string]any) {
	b, _ := json.Marshal(params)
	writeResult(w, s.eng.Call(r.Context(), identityOf(r.Context()).agent, "process", b))
}

// sessionAction maps a session route to a process action; fields are
// taken from the JSON body (POST) or the query string (GET).
func (s *Server) sessionAction(action string, fields ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		params := map[string]any{}
		if r.Method == http.MethodPost {
			body, ok := readBody(w, r)
			if !ok {
				return
			}
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				writeError(w, 400, "invalid_argument", "request body must be a JSON object")
				return
			}
			for _, f := range fields {
				if v, ok := m[f]; ok {
					params[f] = v
				}
			}
			for k := range m {
				if !contains(fields, k) {
					writeError(w, 400, "invalid_argument", fmt.Sprintf("Unknown parameter %q.", k))
					return
				}
			}
		} else {
			q := r.URL.Query()
			for _, f := range fields {
				if v := q.Get(f); v != "" {
					params[f] = queryValue(f, v)
				}
			}
		}
		params["action"] = action
		params["sessionId"] = r.PathValue("id")
		s.action(w, r, params)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// queryValue converts a query parameter to the JSON type the process
// tool expects.
func queryValue(field, v string) any {
	switch field {
	case "offset", "limit", "since", "context", "max", "port", "idleMs":
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	case "raw", "ignoreCase", "bracketed":
		return v == "true" || v == "1"
	}
	return v
}

func (s *Server) input(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		writeError(w, 400, "invalid_argument", "request body must be a JSON object")
		return
	}
	m["sessionId"] = r.PathValue("id")
	if _, keys := m["keys"]; keys || m["hex"] != nil || m["literal"] != nil {
		m["action"] = "send-keys"
	} else {
		m["action"] = "write"
	}
	s.action(w, r, m)
}

func (s *Server) sessionEntry(w http.ResponseWriter, r *http.Request) {
	res := s.eng.Call(r.Context(), identityOf(r.Context()).agent, "process", json.RawMessage(`{"action":"list"}`))
	d, ok := res.Details.(*apitype.ListDetails)
	if !ok {
		writeResult(w, res)
		return
	}
	for _, e := range d.Sessions {
		if e.SessionID == r.PathValue("id") {
			writeJSON(w, 200, e)
			return
		}
	}
	writeError(w, 404, "not_found", "No session found for "+r.PathValue("id"))
}

// recording is GET /v1/sessions/{id}/recording: a PTY session as an
// asciicast v2 file.
func (s *Server) recording(w http.ResponseWriter, r *http.Request) {
	lw := &lazyHeaderWriter{w: w, header: func() {
		w.Header().Set("Content-Type", "application/x-asciicast")
		w.Header().Set("Content-Disposition", `attachment; filename="`+r.PathValue("id")+`.cast"`)
	}}
	err := s.eng.Asciicast(identityOf(r.Context()).agent, r.PathValue("id"), lw)
	var ae *apitype.Error
	if err != nil && !lw.wrote && errors.As(err, &ae) {
		writeError(w, statusOf(ae.Code), ae.Code, ae.Message)
	}
}

// lazyHeaderWriter sets the response headers at the first write, so that
// an error found before any output can still answer with its own status.
type lazyHeaderWriter struct {
	w      http.ResponseWriter
	header func()
	wrote  bool
}

func (l *lazyHeaderWriter) Write(p []byte) (int, error) {
	if !l.wrote {
		l.wrote = true
		l.header()
	}
	return l.w.Write(p)
}

// stream is GET /v1/sessions/{id}/stream: output as SSE, whole lines
// only, resumable by cursor (Last-Event-ID), then the end state.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r.Context())
	sid := r.PathValue("id")
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, 500, "internal", "streaming unsupported")
		return
	}
	sinceText := r.URL.Query().Get("since")
	if lei := r.Header.Get("Last-Event-ID"); lei != "" {
		sinceText = lei
	}
	since, perr := apitype.ParseQuery("since", sinceText)
	if perr != nil {
		writeError(w, 400, perr.Code, perr.Message)
		return
	}
	raw := r.URL.Query().Get("raw") == "true"
	// bytes=true: the output exactly as produced (partial lines and
	// carriage returns kept), for a terminal widget.
	bytes := r.URL.Query().Get("bytes") == "true"
	stream := r.URL.Query().Get("stream")
	// An EventSource cannot set X-Conch-Agent: operators may name the
	// session's agent in the query instead.
	agent := id.agent
	if a := r.URL.Query().Get("agent"); a != "" && id.operator {
		agent = a
	}
	if bytes && stream != "" && stream != "both" {
		writeError(w, 400, "invalid_argument", "bytes=true streams both streams")
		return
	}
	if stream != "" && stream != "both" && stream != "stdout" && stream != "stderr" {
		writeError(w, 400, "invalid_argument", fmt.Sprintf("Invalid stream %q: expected one of both, stdout, stderr.", stream))
		return
	}
	first := true
	for {
		changed := s.eng.Changed(agent, sid)
		var c engine.Chunk
		if bytes {
			c, ok = s.eng.FollowBytes(agent, sid, since)
		} else {
			c, ok = s.eng.Follow(agent, sid, since, raw, stream)
		}
		if !ok {
			if first {
				writeError(w, 404, "not_found", "No session found for "+sid)
			}
			return
		}
		if first {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(200)
			first = false
		}
		if c.Next > since && c.Text != "" {
			data, _ := json.Marshal(map[string]any{"cursor": c.Next, "stream": orBoth(stream), "text": c.Text})
			fmt.Fprintf(w, "id: %d\nevent: output\ndata: %s\n\n", c.Next, data)
		}
		since = max(since, c.Next)
		if c.Ended {
			data, _ := json.Marshal(map[string]any{"state": c.State, "exitCode": c.Exit, "signal": c.Signal, "killedBy": c.Killed})
			fmt.Fprintf(w, "event: end\ndata: %s\n\n", data)
			fl.Flush()
			return
		}
		fl.Flush()
		if c.More {
			continue
		}
		if changed == nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		case <-time.After(15 * time.Second):
			fmt.Fprint(w, ": ping\n\n")
		}
	}
}

func orBoth(s string) string {
	if s == "" || s == "both" {
		return "both"
	}
	return s
}

// store returns the server's approvals store, opened once (approvals.go),
// or answers 500 and returns nil.
func (s *Server) store(w http.ResponseWriter) *approvals.Store {
	st, err := s.approvals.get(s.opt.Home)
	if err != nil {
		writeError(w, 500, "io_error", err.Error())
		return nil
	}
	return st
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	st := s.store(w)
	if st == nil {
		return
	}
	state := approvals.Pending
	if r.URL.Query().Get("state") == "all" {
		state = ""
	}
	list, err := st.List(state)
	if err != nil {
		writeError(w, 500, "io_error", err.Error())
		return
	}
	if list == nil {
		list = []*approvals.Request{}
	}
	writeJSON(w, 200, map[string]any{"approvals": list})
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	st := s.store(w)
	if st == nil {
		return
	}
	req, err := st.Get(r.PathValue("id"))
	id := identityOf(r.Context())
	if err != nil || (!id.operator && req.Agent != id.agent) {
		writeError(w, 404, "not_found", "unknown approval id")
		return
	}
	writeJSON(w, 200, req)
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		Decision string `json:"decision"`
	}
	json.Unmarshal(body, &in)
	d, err := approvals.ParseDecision(in.Decision)
	if err != nil {
		writeError(w, 400, "invalid_argument", err.Error())
		return
	}
	st := s.store(w)
	if st == nil {
		return
	}
	req, err := st.Decide(r.PathValue("id"), d, actor(r))
	var already *approvals.AlreadyResolvedError
	switch {
	case errors.Is(err, approvals.ErrDropped):
		// Its run can no longer happen: the answer says so, and why.
		writeError(w, 409, apitype.CodeApprovalDropped, err.Error())
		return
	case errors.As(err, &already):
		writeError(w, 409, "already_resolved", err.Error())
		return
	case errors.Is(err, approvals.ErrUnknown):
		writeError(w, 404, "not_found", err.Error())
		return
	case err != nil:
		writeError(w, 500, "io_error", err.Error())
		return
	}
	writeJSON(w, 200, map[string]any{"id": req.ID, "decision": req.Decision, "sessionId": req.SessionID, "persisted": []string{}})
}

// nodeApprovals runs system.execApprovals.get|set on the node named by
// the query parameter node.
func (s *Server) nodeApprovals(w http.ResponseWriter, r *http.Request, query string, set json.RawMessage) {
	if s.opt.Nodes == nil {
		writeError(w, 503, apitype.CodeNodeUnavailable, "node hosts are served by conch serve")
		return
	}
	ref, aerr := s.opt.Nodes.SelectOperator(query)
	if aerr != nil {
		writeError(w, statusOf(aerr.Code), aerr.Code, aerr.Message)
		return
	}
	method := "system.execApprovals.get"
	var params any
	if set != nil {
		method, params = "system.execApprovals.set", set
	}
	b, aerr := s.opt.Nodes.Call(r.Context(), ref.ID, method, params, 10*time.Second)
	if aerr != nil {
		switch {
		case aerr.Code == apitype.NodeApprovalsConflict:
			writeError(w, 409, "conflict", aerr.Message)
		case aerr.Code == apitype.NodeInvalidRequest:
			writeError(w, 400, "invalid_argument", aerr.Message)
		default:
			writeError(w, 503, apitype.CodeNodeUnavailable, aerr.Message)
		}
		return
	}
	if set != nil {
		var res struct{ Hash string }
		json.Unmarshal(b, &res)
		s.hub.Publish(engine.Event{Type: "policy.changed", Data: map[string]any{"file": approvals.FileName, "nodeId": ref.ID, "newHash": res.Hash, "by": "api:operator"}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func (s *Server) getApprovalsFile(w http.ResponseWriter, r *http.Request) {
	if n := r.URL.Query().Get("node"); n != "" {
		s.nodeApprovals(w, r, n, nil)
		return
	}
	f, err := approvals.Load(s.opt.Home)
	if err != nil {
		writeError(w, 500, "io_error", err.Error())
		return
	}
	writeJSON(w, 200, map[string]any{"path": approvals.Path(s.opt.Home), "exists": f.Exists(), "hash": f.Hash(), "file": f})
}

func (s *Server) putApprovalsFile(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		File     json.RawMessage `json:"file"`
		BaseHash string          `json:"baseHash"`
	}
	if err := json.Unmarshal(body, &in); err != nil || len(in.File) == 0 {
		writeError(w, 400, "invalid_argument", "body must be {file, baseHash}")
		return
	}
	if n := r.URL.Query().Get("node"); n != "" {
		s.nodeApprovals(w, r, n, body)
		return
	}
	f, err := approvals.Parse(in.File)
	if err != nil {
		writeError(w, 400, "invalid_argument", err.Error())
		return
	}
	c, err := admin.SetApprovals(s.opt.Home, f, in.BaseHash, actor(r), s.hub.Publish)
	if err != nil {
		var inv *approvals.InvalidError
		switch {
		case errors.Is(err, approvals.ErrConflict):
			writeError(w, 409, "conflict", err.Error())
		case errors.As(err, &inv):
			writeError(w, 400, "invalid_argument", err.Error())
		default:
			// The file could not be written (a full disk): nothing
			// changed, and the client's file is not at fault.
			writeError(w, 500, "io_error", err.Error())
		}
		return
	}
	if c.LedgerErr != nil {
		s.log.Warn("ledger policy record", "err", c.LedgerErr)
	}
	writeJSON(w, 200, map[string]any{"hash": c.Hash()})
}

func (s *Server) explain(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		Agent, Host, Node, Cwd, Command string
	}
	json.Unmarshal(body, &in)
	if in.Agent == "" {
		in.Agent = "main"
	}
	x, err := admin.Explain(s.opt.Home, in.Agent, in.Cwd, in.Command)
	if err != nil {
		writeAdminError(w, err, "internal")
		return
	}
	out := x.JSON()
	out["text"] = x.Text(in.Agent)
	writeJSON(w, 200, out)
}

func (s *Server) ledgerTail(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, perr := apitype.ParseQuery("since", q.Get("since"))
	if perr != nil {
		writeError(w, 400, perr.Code, perr.Message)
		return
	}
	limit64, perr := apitype.ParseQuery("limit", q.Get("limit"))
	if perr != nil {
		writeError(w, 400, perr.Code, perr.Message)
		return
	}
	limit := int(limit64)
	if limit <= 0 {
		limit = 100
	}
	recs, err := ledger.Tail(s.opt.Home, limit, ledger.Filter{Since: since, Agent: q.Get("agent"), Session: q.Get("session"), Approval: q.Get("approval")})
	if err != nil {
		writeError(w, 500, "io_error", err.Error())
		return
	}
	if recs == nil {
		recs = []ledger.Record{}
	}
	writeJSON(w, 200, map[string]any{"records": recs})
}

func (s *Server) ledgerVerify(w http.ResponseWriter, r *http.Request) {
	rep, err := ledger.Verify(s.opt.Home)
	if err != nil {
		writeError(w, 500, "io_error", err.Error())
		return
	}
	writeJSON(w, 200, rep)
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	list, err := s.opt.Agents.List()
	if err != nil {
		writeError(w, 500, "io_error", err.Error())
		return
	}
	out := []map[string]any{}
	for _, a := range list {
		out = append(out, map[string]any{"name": a.ID, "workspace": a.Workspace, "createdAt": a.CreatedAt})
	}
	writeJSON(w, 200, map[string]any{"agents": out})
}

func (s *Server) addAgent(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct{ Name, Workspace string }
	json.Unmarshal(body, &in)
	tok, err := s.opt.Agents.Add(in.Name, in.Workspace)
	switch {
	case errors.Is(err, auth.ErrExists):
		writeError(w, 409, "conflict", err.Error())
	case errors.Is(err, auth.ErrInvalid):
		writeError(w, 400, "invalid_argument", err.Error())
	case err != nil:
		writeError(w, 500, "io_error", err.Error())
	default:
		writeJSON(w, 200, map[string]any{"name": in.Name, "token": tok})
	}
}

func (s *Server) removeAgent(w http.ResponseWriter, r *http.Request) {
	if err := s.opt.Agents.Remove(r.PathValue("id")); err != nil {
		writeError(w, 404, "not_found", err.Error())
		return
	}
	writeJSON(w, 200, map[string]any{"name": r.PathValue("id"), "removed": true})
}

func (s *Server) rotateAgent(w http.ResponseWriter, r *http.Request) {
	tok, err := s.opt.Agents.Rotate(r.PathValue("id"))
	if err != nil {
		writeError(w, 404, "not_found", err.Error())
		return
	}
	writeJSON(w, 200, map[string]any{"name": r.PathValue("id"), "token": tok})
}

func (s *Server) getDefaults(w http.ResponseWriter, r *http.Request) {
	d, err := admin.ExecDefaults(s.opt.Home, r.PathValue("id"))
	if err != nil {
		writeError(w, 500, "io_error", err.Error())
		return
	}
	writeJSON(w, 200, d)
}

func (s *Server) putDefaults(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var d apitype.ExecDefaults
	if err := json.Unmarshal(body, &d); err != nil {
		writeError(w, 400, "invalid_argument", err.Error())
		return
	}
	d, err := admin.SetExecDefaults(s.opt.Home, r.PathValue("id"), d)
	if err != nil {
		writeAdminError(w, err, "io_error")
		return
	}
	writeJSON(w, 200, d)
}

// writeAdminError answers the error of an admin use case: 400 for a
// request the operator must correct (admin.ErrInvalid), else 500 with
// code.
func writeAdminError(w http.ResponseWriter, err error, code string) {
	if errors.Is(err, admin.ErrInvalid) {
		writeError(w, 400, "invalid_argument", err.Error())
		return
	}
	writeError(w, 500, code, err.Error())
}

func (s *Server) deleteDefaults(w http.ResponseWriter, r *http.Request) {
	if err := admin.ClearExecDefaults(s.opt.Home, r.PathValue("id")); err != nil {
		writeError(w, 500, "io_error", err.Error())
		return
	}
	writeJSON(w, 200, map[string]any{"cleared": true})
}
