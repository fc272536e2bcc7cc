package gateway

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs url with an optional bearer token and returns the status and
// body.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// parseMetrics parses a Prometheus text page with the Prometheus parser
// (a page it rejects fails the test).
func parseMetrics(t *testing.T, page string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		t.Fatalf("the Prometheus text parser rejects /metrics: %v\n%s", err, page)
	}
	return fams
}

// labelNames returns the sorted label names of a family's first sample.
func labelNames(f *dto.MetricFamily) string {
	if len(f.Metric) == 0 {
		return ""
	}
	var n []string
	for _, l := range f.Metric[0].Label {
		n = append(n, l.GetName())
	}
	return strings.Join(n, ",")
}

// TestMetricsPrometheus scrapes a real gateway's /metrics and checks every
// conch family's type and labels with the Prometheus parser, the Go
// runtime and process collectors, and the naming rules: counters end in
// _total, and a family with a unit in its name names it in the base unit.
func TestMetricsPrometheus(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, ""))
	g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "true"}, nil)
	_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "sleep 931.7", "background": true}, nil)
	id := m["details"].(map[string]any)["sessionId"].(string)
	defer g.Do("POST", "/v1/sessions/"+id+"/kill", g.Token, map[string]any{}, nil)
	code, page := scrape(t, g.Base+"/metrics", g.Operator)
	if code != 200 {
		t.Fatalf("operator scrape: %d %s", code, page)
	}
	fams := parseMetrics(t, page)
	want := map[string]struct {
		typ    dto.MetricType
		labels string
	}{
		"conch_sessions_running":      {dto.MetricType_GAUGE, "agent,host"},
		"conch_exec_total":            {dto.MetricType_COUNTER, "agent,host,status"},
		"conch_exec_duration_seconds": {dto.MetricType_HISTOGRAM, ""},
		"conch_home_disk_full":        {dto.MetricType_GAUGE, ""},
		"conch_home_unwritable":       {dto.MetricType_GAUGE, ""},
		"conch_home_free_bytes":       {dto.MetricType_GAUGE, ""},
		"conch_approvals_pending":     {dto.MetricType_GAUGE, ""},
		"conch_nodes_connected":       {dto.MetricType_GAUGE, ""},
		"conch_handler_panics_total":  {dto.MetricType_COUNTER, "adapter"},
		"conch_corrupt_files_total":   {dto.MetricType_COUNTER, "kind"},
	}
	for name, w := range want {
		f := fams[name]
		if f == nil {
			t.Errorf("no family %s", name)
			continue
		}
		if f.GetType() != w.typ {
			t.Errorf("%s: type %v, want %v", name, f.GetType(), w.typ)
		}
		if got := labelNames(f); got != w.labels {
			t.Errorf("%s: labels %q, want %q", name, got, w.labels)
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
	}
	if h := fams["conch_exec_duration_seconds"].GetMetric()[0].GetHistogram(); h.GetSampleCount() != 2 || len(h.GetBucket()) == 0 {
		t.Errorf("exec histogram after one call: %v", h)
	}
	if c := fams["conch_sessions_running"].GetMetric(); len(c) != 1 || c[0].GetGauge().GetValue() != 1 {
		t.Errorf("sessions running with one background session: %v", c)
	}
	for _, runtime := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds_total"} {
		if fams[runtime] == nil {
			t.Errorf("no %s (Go runtime / process collector)", runtime)
		}
	}
	unit := regexp.MustCompile(`_(ms|milliseconds|kb|mb|bytes_total|secs|minutes|hours)$`)
	for name, f := range fams {
		if f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
			t.Errorf("counter %s does not end in _total", name)
		}
		if f.GetType() != dto.MetricType_COUNTER && strings.HasSuffix(name, "_total") {
			t.Errorf("%s ends in _total but is a %v", name, f.GetType())
		}
		if strings.HasPrefix(name, "conch_") && unit.MatchString(name) {
			t.Errorf("%s is not in a base unit", name)
		}
	}
}

// TestMetricsScrapeCredentials: a metrics token reads /metrics on the main
// listener and nothing else; the loopback metrics listener serves /metrics
// only, requires the metrics token when one is set, and takes neither the
// agent's token nor the operator's for anything but /metrics.
func TestMetricsScrapeCredentials(t *testing.T) {
	home := e2etest.NewHome(t, "")
	tokFile := filepath.Join(t.TempDir(), "metrics.token")
	const mtok = "scrape-0123456789abcdef"
	if err := os.WriteFile(tokFile, []byte(mtok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := e2etest.StartServe(t, home, nil, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--metrics-token-file", tokFile)
	m := regexp.MustCompile(`metrics (http://127\.0\.0\.1:\d+)/metrics`).FindStringSubmatch(g.Banner)
	if m == nil {
		t.Fatalf("no metrics listener in %q", g.Banner)
	}
	mbase := m[1]

	// Main listener.
	if code, page := scrape(t, g.Base+"/metrics", mtok); code != 200 {
		t.Fatalf("metrics token on the main listener: %d %s", code, page)
	} else {
		parseMetrics(t, page)
	}
	if code, _ := scrape(t, g.Base+"/metrics", g.Token); code != 403 {
		t.Errorf("agent token read /metrics: %d", code)
	}
	for _, path := range []string{"/v1/sessions", "/v1/agents", "/v1/ledger", "/v1/approvals"} {
		if code, body := scrape(t, g.Base+path, mtok); code != 403 {
			t.Errorf("metrics token on %s: %d %s", path, code, body)
		}
	}
	if code, body := scrape(t, g.Base+"/metrics", mtok+"x"); code != 401 {
		t.Errorf("a wrong token: %d %s", code, body)
	}

	// The metrics listener.
	if code, page := scrape(t, mbase+"/metrics", mtok); code != 200 {
		t.Fatalf("metrics listener with the metrics token: %d %s", code, page)
	} else if fams := parseMetrics(t, page); fams["conch_exec_total"] == nil && fams["conch_approvals_pending"] == nil {
		t.Errorf("metrics listener page lacks conch metrics:\n%s", page)
	}
	for _, tok := range []string{"", g.Token, g.Operator} {
		if code, _ := scrape(t, mbase+"/metrics", tok); code != 401 {
			t.Errorf("metrics listener with token %.4s…: %d, want 401", tok, code)
		}
	}
	for _, path := range []string{"/v1/sessions", "/v1/health", "/mcp", "/"} {
		if code, _ := scrape(t, mbase+path, mtok); code != 404 {
			t.Errorf("metrics listener serves %s: %d", path, code)
		}
	}
	req, _ := http.NewRequest("GET", mbase+"/metrics", nil)
	req.Host = "attacker.example:80"
	req.Header.Set("Authorization", "Bearer "+mtok)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != 403 {
		t.Errorf("metrics listener with a foreign Host: %d", resp.StatusCode)
	}
}

// TestMetricsListenerOpen: without a metrics token the loopback metrics
// listener needs no credentials.
func TestMetricsListenerOpen(t *testing.T) {
	g := e2etest.StartServe(t, e2etest.NewHome(t, ""), nil, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	m := regexp.MustCompile(`metrics (http://127\.0\.0\.1:\d+)/metrics`).FindStringSubmatch(g.Banner)
	if m == nil {
		t.Fatalf("no metrics listener in %q", g.Banner)
	}
	code, page := scrape(t, m[1]+"/metrics", "")
	if code != 200 {
		t.Fatalf("open metrics listener: %d %s", code, page)
	}
	parseMetrics(t, page)
	if code, _ := scrape(t, g.Base+"/metrics", ""); code != 401 {
		t.Errorf("main listener /metrics without a token: %d", code)
	}
}

// TestMetricsFlagsRefused: bad scrape settings stop conch serve with a
// clear message.
func TestMetricsFlagsRefused(t *testing.T) {
	home := e2etest.NewHome(t, "")
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-listen", "0.0.0.0:0"}, "must be a loopback address"},
		{[]string{"--metrics-listen", "nonsense"}, "bad --metrics-listen"},
		{[]string{"--metrics-token-file", short}, "at least 16"},
		{[]string{"--metrics-token-file", filepath.Join(dir, "missing")}, "no such file"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		b, err := exec.CommandContext(ctx, e2etest.ConchBin, append([]string{"serve", "--home", home, "--listen", "127.0.0.1:0"}, c.args...)...).CombinedOutput()
		cancel()
		out := string(b)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%v: err %v, output %q, want %q", c.args, err, out, c.want)
		}
	}
}
