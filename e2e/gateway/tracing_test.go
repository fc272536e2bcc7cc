package gateway

import (
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace endpoint on loopback that keeps the
// spans it is sent. (A test stand-in for a collector: it speaks the real
// protocol, protobuf over HTTP, and decodes with the OTLP definitions.)
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs map[*tracepb.Span]map[string]string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{url: "http://" + ln.Addr().String(), attrs: map[*tracepb.Span]map[string]string{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "unexpected request", 400)
			return
		}
		b, _ := io.ReadAll(req.Body)
		var msg coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			svc := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					svc = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					m := map[string]string{"service.name": svc}
					for _, a := range sp.Attributes {
						switch v := a.GetValue().GetValue().(type) {
						case *commonpb.AnyValue_StringValue:
							m[a.Key] = v.StringValue
						case *commonpb.AnyValue_IntValue:
							m[a.Key] = strconv.FormatInt(v.IntValue, 10)
						case *commonpb.AnyValue_BoolValue:
							m[a.Key] = strconv.FormatBool(v.BoolValue)
						}
					}
					r.spans = append(r.spans, sp)
					r.attrs[sp] = m
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

// find returns the spans named name whose attribute key is value.
func (r *otlpReceiver) find(name, key, value string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, sp := range r.spans {
		if sp.Name == name && (key == "" || r.attrs[sp][key] == value) {
			out = append(out, sp)
		}
	}
	return out
}

func (r *otlpReceiver) attr(sp *tracepb.Span, key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attrs[sp][key]
}

// TestTracesOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, conch serve sends
// a trace per exec call (the call, its policy decision, its run with the
// end state) and a trace per approval (linked to the call, whose trace
// also gets the approval wait), over OTLP/HTTP. Without the variable
// nothing is sent.
func TestTracesOTLP(t *testing.T) {
	rcv := newOTLPReceiver(t)
	home := e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`)
	g := e2etest.StartServe(t, home, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.url, "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=conch-test"}, "--listen", "127.0.0.1:0")

	_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo traced-1; exit 3"}, nil)
	if !strings.HasPrefix(m["text"].(string), "traced-1") {
		t.Fatalf("exec: %v", m)
	}
	var sid string
	var exec1 *tracepb.Span
	e2etest.Eventually(t, 20*time.Second, func() string {
		s := rcv.find("conch.exec", "conch.command", "echo traced-1; exit 3")
		if len(s) != 1 {
			return "no exec span"
		}
		exec1, sid = s[0], rcv.attr(s[0], "conch.session_id")
		if len(rcv.find("conch.run", "conch.session_id", sid)) == 0 || sid == "" {
			return "no run span for " + sid
		}
		return ""
	})
	for k, want := range map[string]string{"conch.agent": "main", "conch.status": "completed", "conch.exit_code": "3", "service.name": "conch-test"} {
		if got := rcv.attr(exec1, k); got != want {
			t.Errorf("exec span %s = %q, want %q", k, got, want)
		}
	}
	run := rcv.find("conch.run", "conch.session_id", sid)[0]
	pol := rcv.find("conch.policy", "", "")
	if string(run.TraceId) != string(exec1.TraceId) || string(run.ParentSpanId) != string(exec1.SpanId) {
		t.Errorf("run span is not a child of the exec span: %x/%x vs %x/%x", run.TraceId, run.ParentSpanId, exec1.TraceId, exec1.SpanId)
	}
	if rcv.attr(run, "conch.end.state") != "exited" || rcv.attr(run, "conch.end.exit_code") != "3" {
		t.Errorf("run span end state: %v %v", rcv.attr(run, "conch.end.state"), rcv.attr(run, "conch.end.exit_code"))
	}
	var polOK bool
	for _, p := range pol {
		if string(p.ParentSpanId) == string(exec1.SpanId) && rcv.attr(p, "conch.policy.outcome") == "run" {
			polOK = true
		}
	}
	if !polOK {
		t.Errorf("no policy span with outcome run under the exec span (%d policy spans)", len(pol))
	}

	// An approval.
	_, m = g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo traced-2", "ask": "always"}, nil)
	d := m["details"].(map[string]any)
	if d["status"] != "approval-pending" {
		t.Fatalf("exec with ask=always: %v", m)
	}
	sid2, aid := d["sessionId"].(string), d["approvalId"].(string)
	if code, m := g.Do("POST", "/v1/approvals/"+d["approvalSlug"].(string)+"/decision", g.Operator, map[string]any{"decision": "once"}, nil); code != 200 {
		t.Fatalf("decision: %d %v", code, m)
	}
	e2etest.Eventually(t, 20*time.Second, func() string {
		if len(rcv.find("conch.approval", "conch.approval_id", aid)) == 0 || len(rcv.find("conch.approval.wait", "conch.approval_id", aid)) == 0 ||
			len(rcv.find("conch.run", "conch.session_id", sid2)) == 0 || len(rcv.find("conch.exec", "conch.session_id", sid2)) == 0 {
			return "approval, approval wait, run or exec span missing"
		}
		return ""
	})
	exec2 := rcv.find("conch.exec", "conch.session_id", sid2)[0]
	appr := rcv.find("conch.approval", "conch.approval_id", aid)[0]
	wait := rcv.find("conch.approval.wait", "conch.approval_id", aid)[0]
	run2 := rcv.find("conch.run", "conch.session_id", sid2)[0]
	if rcv.attr(exec2, "conch.status") != "approval-pending" {
		t.Errorf("exec span status %q", rcv.attr(exec2, "conch.status"))
	}
	if rcv.attr(appr, "conch.approval.decision") != "allow-once" || rcv.attr(appr, "conch.approval.decided_by") == "" {
		t.Errorf("approval span: decision %q by %q", rcv.attr(appr, "conch.approval.decision"), rcv.attr(appr, "conch.approval.decided_by"))
	}
	if string(appr.TraceId) == string(exec2.TraceId) || len(appr.Links) != 1 || string(appr.Links[0].SpanId) != string(exec2.SpanId) {
		t.Errorf("approval trace is not its own, linked to the exec call: %x links %v", appr.TraceId, appr.Links)
	}
	for name, sp := range map[string]*tracepb.Span{"approval wait": wait, "run": run2} {
		if string(sp.TraceId) != string(exec2.TraceId) || string(sp.ParentSpanId) != string(exec2.SpanId) {
			t.Errorf("%s span is not a child of the exec span: trace %s", name, hex.EncodeToString(sp.TraceId))
		}
	}
	if rcv.attr(run2, "conch.end.state") != "exited" || rcv.attr(run2, "conch.end.exit_code") != "0" {
		t.Errorf("approved run end state %q", rcv.attr(run2, "conch.end.state"))
	}

	// Off by default: a gateway without the variables sends nothing.
	rcv2 := newOTLPReceiver(t)
	g2 := e2etest.StartGateway(t, e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`))
	g2.Do("POST", "/v1/exec", g2.Token, map[string]any{"command": "echo untraced"}, nil)
	g2.Stop()
	rcv2.mu.Lock()
	n := len(rcv2.spans)
	rcv2.mu.Unlock()
	if n != 0 {
		t.Errorf("spans sent without OTEL_EXPORTER_OTLP_ENDPOINT: %d", n)
	}
}
