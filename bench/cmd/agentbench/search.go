package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

// searchStep is step 2: process search over a large journal.
type searchStep struct {
	Bytes     int64  `json:"bytes"`
	Lines     int64  `json:"lines"`
	Generator string `json:"generator"`
	// CaptureMs: the background session printing the data, from exec to
	// the poll that saw it end; GenerateMs: the same generator into a file.
	CaptureMs  float64         `json:"captureMs"`
	GenerateMs float64         `json:"generateMs"`
	Patterns   []searchPattern `json:"patterns"`
	// conch mcp resident memory around the searches.
	RSSBeforeMiB float64 `json:"peakBeforeMiB"` // VmHWM after the capture
	PeakMiB      float64 `json:"peakMiB"`       // VmHWM after the searches
	// Reads: other reads of the same session after the searches.
	Reads []readCost `json:"reads"`
}

// readCost is one single-shot read of the big session.
type readCost struct {
	Name      string  `json:"name"`
	Ms        float64 `json:"ms"`
	BeforeMiB float64 `json:"beforeMiB"` // conch mcp VmHWM before the call
	PeakMiB   float64 `json:"peakMiB"`   // conch mcp VmHWM after the call
	Chars     int     `json:"chars"`
}

type searchPattern struct {
	Pattern     string    `json:"pattern"`
	Matches     int       `json:"matches"`
	GrepMatches int       `json:"grepMatches"`
	ConchMs     []float64 `json:"conchMs"`
	GrepMs      []float64 `json:"grepMs"`
	ConchMedian float64   `json:"conchMedianMs"`
	GrepMedian  float64   `json:"grepMedianMs"`
	Ratio       float64   `json:"ratio"`
	GrepCommand string    `json:"grepCommand"`
}

// lineFormat is one line of the generated journal: 100 bytes with the
// newline. Every lines/10-th line has status=503, the rest status=200.
const lineFormat = `%09d ts=2025-01-01T00:00:00Z worker=%05d req=%09d status=%03d path=/api/v1/items/%08d`

func generator(lines int64) string {
	step := max(lines/10, 1)
	return fmt.Sprintf(`awk 'BEGIN{for(i=1;i<=%d;i++){s=(i%%%d==0)?503:200; printf "%s\n", i, i%%16, i*7, s, i%%99999989}}'`,
		lines, step, lineFormat)
}

func (r *run) searchJournal() *searchStep {
	lineLen := int64(len(fmt.Sprintf(lineFormat, 1, 1, 1, 200, 1)) + 1)
	lines := r.o.searchBytes / lineLen
	step := &searchStep{Lines: lines, Bytes: lines * lineLen, Generator: generator(lines)}
	s, err := startServer(r.ctx, r.o.conch, `{"quotas":{"execPerSecond":0},"tools":{"exec":{"journalMaxBytes":134217728}}}`)
	if err != nil {
		r.fail("search: %v", err)
		return nil
	}
	defer func() {
		if n := s.Close(); n > 0 {
			r.note("search: killed %d supervisor(s) left running", n)
		}
	}()

	// Baseline data: the same generator into a file.
	file := filepath.Join(s.Root, "journal.txt")
	t0 := time.Now()
	gen := exec.CommandContext(r.ctx, "sh", "-c", step.Generator+" > "+file)
	if out, err := gen.CombinedOutput(); err != nil {
		r.fail("search: generate %s: %v %s", file, err, out)
		return nil
	}
	step.GenerateMs = benchkit.Ms(time.Since(t0))
	if fi, err := os.Stat(file); err != nil || fi.Size() != step.Bytes {
		r.fail("search: %s is not %d bytes (%v)", file, step.Bytes, err)
		return nil
	}

	id, captureMs, err := r.capture(s, step)
	if err != nil {
		r.fail("search: %v", err)
		return nil
	}
	step.CaptureMs = captureMs
	pid, _ := s.PID()
	before, _ := benchkit.StatusKB(pid, "VmHWM")
	step.RSSBeforeMiB = benchkit.MiB(before)

	for _, pat := range []string{"status=503", "status=418"} {
		p := searchPattern{Pattern: pat, GrepCommand: "grep -n '" + pat + "' " + "journal.txt"}
		var cd, gd []time.Duration
		var grepLines []string
		for i := 0; i < r.o.searchReps; i++ {
			t0 := time.Now()
			res, err := s.Call(r.ctx, 10*time.Minute, "process", map[string]any{
				"action": "search", "sessionId": id, "pattern": pat, "max": 1000,
			})
			d := time.Since(t0)
			if err != nil || res.IsError {
				r.fail("search %s: %v %s", pat, err, benchkit.Clip(res.Text, 300))
				continue
			}
			cd = append(cd, d)
			p.Matches = int(res.Num("totalMatches"))
			if i == 0 {
				r.checkSearch(res, pat, lines)
			}

			t0 = time.Now()
			out, err := exec.CommandContext(r.ctx, "grep", "-n", pat, file).Output()
			d = time.Since(t0)
			if err != nil && len(out) > 0 { // grep exits 1 when nothing matched
				r.fail("grep %s: %v", pat, err)
				continue
			}
			gd = append(gd, d)
			grepLines = strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			if len(out) == 0 {
				grepLines = nil
			}
			p.GrepMatches = len(grepLines)
			if i == 0 && !sameMatches(res, grepLines) {
				r.fail("search %s: conch matches %s differ from grep -n's %q", pat, matchLines(res), grepLines)
			}
		}
		for _, d := range cd {
			p.ConchMs = append(p.ConchMs, benchkit.Ms(d))
		}
		for _, d := range gd {
			p.GrepMs = append(p.GrepMs, benchkit.Ms(d))
		}
		p.ConchMedian, p.GrepMedian = benchkit.Ms(benchkit.Median(cd)), benchkit.Ms(benchkit.Median(gd))
		p.Ratio = benchkit.Ratio(p.ConchMedian, p.GrepMedian)
		step.Patterns = append(step.Patterns, p)
	}
	hwm, _ := benchkit.StatusKB(pid, "VmHWM")
	step.PeakMiB = benchkit.MiB(hwm)

	// For context: the same session read by the agent's first poll (all
	// of it unread), by a default log (last 200 lines) and by a search,
	// each on a fresh conch mcp so that its peak memory is its own.
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"poll (whole output unread)", map[string]any{"action": "poll"}},
		{"log (default: last 200 lines)", map[string]any{"action": "log"}},
		{"search status=503", map[string]any{"action": "search", "pattern": "status=503"}},
	} {
		rc, err := r.readCost(step, c.name, c.args)
		if err != nil {
			r.fail("search: %s: %v", c.name, err)
			continue
		}
		step.Reads = append(step.Reads, rc)
	}
	return step
}

// capture runs the generator as a background session of s and waits for
// its end with process wait until=exit (not poll, which would render the
// whole unread output).
func (r *run) capture(s *benchkit.Server, step *searchStep) (string, float64, error) {
	t0 := time.Now()
	e, err := s.Call(r.ctx, time.Minute, "exec", map[string]any{"command": step.Generator, "background": true})
	if err != nil || e.IsError {
		return "", 0, fmt.Errorf("exec: %v %s", err, benchkit.Clip(e.Text, 300))
	}
	id := e.Str("sessionId")
	end, err := s.Call(r.ctx, 11*time.Minute, "process", map[string]any{"action": "wait", "sessionId": id, "timeout": 600000})
	if err != nil {
		return "", 0, err
	}
	d := benchkit.Ms(time.Since(t0))
	if end.Str("outcome") != "met" || end.Num("exitCode") != 0 {
		return "", 0, fmt.Errorf("generator session: %s", benchkit.Clip(end.Text, 300))
	}
	if c := int64(end.Num("cursor")); c != step.Bytes {
		return "", 0, fmt.Errorf("journal cursor %d, want %d", c, step.Bytes)
	}
	return id, d, nil
}

// readCost captures the data on a fresh conch mcp and times one process
// call on it, with conch mcp's peak RSS before and after.
func (r *run) readCost(step *searchStep, name string, args map[string]any) (readCost, error) {
	s, err := startServer(r.ctx, r.o.conch, `{"quotas":{"execPerSecond":0},"tools":{"exec":{"journalMaxBytes":134217728}}}`)
	if err != nil {
		return readCost{}, err
	}
	defer s.Close()
	id, _, err := r.capture(s, step)
	if err != nil {
		return readCost{}, err
	}
	pid, _ := s.PID()
	before, _ := benchkit.StatusKB(pid, "VmHWM")
	a := map[string]any{"sessionId": id}
	for k, v := range args {
		a[k] = v
	}
	t0 := time.Now()
	res, err := s.Call(r.ctx, 10*time.Minute, "process", a)
	d := time.Since(t0)
	if err != nil || res.IsError {
		return readCost{}, fmt.Errorf("%v %s", err, benchkit.Clip(res.Text, 300))
	}
	hwm, _ := benchkit.StatusKB(pid, "VmHWM")
	return readCost{Name: name, Ms: benchkit.Ms(d), BeforeMiB: benchkit.MiB(before), PeakMiB: benchkit.MiB(hwm), Chars: len([]rune(res.Text))}, nil
}

// checkSearch checks the summary line of a search result.
func (r *run) checkSearch(res benchkit.Result, pat string, lines int64) {
	if !strings.Contains(res.Text, fmt.Sprintf("%d lines", lines)) {
		r.fail("search %s: result does not cover %d lines: %s", pat, lines, benchkit.Clip(lastLine(res.Text), 200))
	}
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// matchLines lists "line:text" of a search result's matches.
func matchLines(res benchkit.Result) []string {
	ms, _ := res.D["matches"].([]any)
	var out []string
	for _, m := range ms {
		mm, _ := m.(map[string]any)
		line, _ := mm["line"].(float64)
		text, _ := mm["text"].(string)
		out = append(out, strconv.Itoa(int(line))+":"+text)
	}
	return out
}

func sameMatches(res benchkit.Result, grepLines []string) bool {
	return slices.Equal(matchLines(res), grepLines)
}
