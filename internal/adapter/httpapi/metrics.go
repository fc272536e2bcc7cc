package httpapi

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/base/guard"
	"github.com/conchsh/conch/internal/store/auth"
)

// corruptKinds are the kinds of damaged state files conch_corrupt_files_total
// reports, each always present so a rate() has a series from the start.
var corruptKinds = []string{"exit", "idempotency", "journal", "meta", "state"}

var (
	descSessionsRunning = prometheus.NewDesc("conch_sessions_running", "Running sessions.", []string{"agent", "host"}, nil)
	descExecTotal       = prometheus.NewDesc("conch_exec_total", "Exec calls by outcome.", []string{"agent", "host", "status"}, nil)
	descExecDuration    = prometheus.NewDesc("conch_exec_duration_seconds", "Duration of exec calls.", nil, nil)
	descDiskFull        = prometheus.NewDesc("conch_home_disk_full", "1 while the home is out of disk space (exec refuses new sessions with disk_full).", nil, nil)
	descUnwritable      = prometheus.NewDesc("conch_home_unwritable", "1 while the home cannot be written: read-only, I/O errors, permissions (exec refuses new sessions with home_unwritable).", nil, nil)
	descFreeBytes       = prometheus.NewDesc("conch_home_free_bytes", "Free space of the home's filesystem.", nil, nil)
	descApprovals       = prometheus.NewDesc("conch_approvals_pending", "Approval requests waiting for a decision.", nil, nil)
	descNodes           = prometheus.NewDesc("conch_nodes_connected", "Connected node hosts.", nil, nil)
	descPanics          = prometheus.NewDesc("conch_handler_panics_total", "Panics recovered in request handlers, by adapter.", []string{"adapter"}, nil)
	descCorrupt         = prometheus.NewDesc("conch_corrupt_files_total", "Damaged state files found (cut short, not JSON, checksum mismatch, unreadable journal records), by kind.", []string{"kind"}, nil)
	descWriteFailures   = prometheus.NewDesc("conch_state_write_failures_total", "Writes of session state files (exit.json, state.json, meta.json) that failed, by file.", []string{"file"}, nil)
)

// writeFailureFiles are the session files whose failed writes are counted,
// each reported (0 too) so that a rate over the counter needs no absent
// series.
var writeFailureFiles = []string{"exit", "state", "meta"}

// conchCollector reads the engine's counters and gauges at each scrape:
// the engine keeps the numbers, this only names them.
type conchCollector struct{ s *Server }

func (c conchCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSessionsRunning, descExecTotal, descExecDuration, descDiskFull, descUnwritable, descFreeBytes, descApprovals, descNodes, descPanics, descCorrupt, descWriteFailures} {
		ch <- d
	}
}

func (c conchCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	st := s.eng.Stats()
	for k, n := range st.Running {
		ch <- prometheus.MustNewConstMetric(descSessionsRunning, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for k, n := range st.ExecTotal {
		ch <- prometheus.MustNewConstMetric(descExecTotal, prometheus.CounterValue, float64(n), k[0], k[1], k[2])
	}
	ch <- execHistogram(st)
	disk := s.eng.DiskStatus()
	ch <- prometheus.MustNewConstMetric(descDiskFull, prometheus.GaugeValue, gauge(disk.Full))
	ch <- prometheus.MustNewConstMetric(descUnwritable, prometheus.GaugeValue, gauge(disk.Unwritable))
	ch <- prometheus.MustNewConstMetric(descFreeBytes, prometheus.GaugeValue, float64(disk.FreeBytes))
	ch <- prometheus.MustNewConstMetric(descApprovals, prometheus.GaugeValue, float64(st.Pending))
	connected := 0
	if s.opt.Nodes != nil {
		connected = s.opt.Nodes.Connected()
	}
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(connected))
	for _, a := range guard.Adapters {
		ch <- prometheus.MustNewConstMetric(descPanics, prometheus.CounterValue, float64(guard.Get(a)), a)
	}
	for _, kind := range corruptKinds {
		ch <- prometheus.MustNewConstMetric(descCorrupt, prometheus.CounterValue, float64(st.Damaged[kind]), kind)
	}
	for _, file := range writeFailureFiles {
		ch <- prometheus.MustNewConstMetric(descWriteFailures, prometheus.CounterValue, float64(st.WriteFailures[file]), file)
	}
}

func gauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// execHistogram turns the engine's cumulative bucket counts into a
// histogram; the +Inf bucket is the count.
func execHistogram(st engine.Stats) prometheus.Metric {
	buckets := make(map[float64]uint64, len(st.ExecBuckets))
	for i, b := range st.ExecBuckets {
		var n int64
		if i < len(st.ExecCounts) {
			n = st.ExecCounts[i]
		}
		buckets[b] = uint64(n)
	}
	return prometheus.MustNewConstHistogram(descExecDuration, uint64(st.ExecCount), st.ExecSum, buckets)
}

// newMetricsHandler returns the /metrics handler: a private registry (the
// process-wide default registry is not used) with conch's metrics, the Go
// runtime collector and the process collector, in the Prometheus text or
// OpenMetrics format as the scraper asks.
func (s *Server) newMetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		conchCollector{s},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
}

// MetricsHandler is the handler of the separate metrics listener
// (conch serve --metrics-listen): it serves GET /metrics and nothing else.
// Its Host check admits only loopback names (and the listen address's own
// host), so a web page cannot read it through DNS rebinding. When a
// metrics token is configured it is required here too.
func (s *Server) MetricsHandler(listen string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			writeError(w, http.StatusNotFound, "not_found", "this listener serves /metrics only")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "invalid_argument", "use GET")
			return
		}
		if !loopbackHost(r.Host, listen) {
			writeError(w, http.StatusForbidden, "forbidden", "Host header not allowed")
			return
		}
		if s.opt.MetricsToken != "" {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || !auth.Equal(tok, s.opt.MetricsToken) {
				w.Header().Set("WWW-Authenticate", "Bearer")
				writeError(w, http.StatusUnauthorized, "unauthenticated", "the metrics token is required")
				return
			}
		}
		s.metricsH.ServeHTTP(w, r)
	})
}
