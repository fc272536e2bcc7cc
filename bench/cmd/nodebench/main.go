// Command nodebench measures what running through a node host costs: the
// exec round trip via a node against the same call run locally on the
// gateway, and output throughput through a node against local, all in
// one run of one gateway (bench/README.md, "Node hosts").
//
// It starts `conch serve` and `conch node` on fresh temporary homes on
// this machine (loopback), pairs them, and alternates blocks of local and
// node calls (switching the agent's exec defaults between host=gateway
// and host=node) so that drift hits both sides alike.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

func main() {
	bin := flag.String("conch", "", "the conch binary (required)")
	n := flag.Int("n", 200, "measured round trips on each side")
	block := flag.Int("block", 20, "calls per block before switching sides")
	size := flag.Int64("bytes", 50<<20, "output size of the throughput step")
	reps := flag.Int("reps", 3, "throughput repetitions on each side (medians reported)")
	asJSON := flag.Bool("json", false, "print the report as JSON")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "nodebench: -conch is required")
		os.Exit(2)
	}
	rep, err := run(*bin, *n, *block, *size, *reps)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodebench:", err)
		os.Exit(1)
	}
	if *asJSON {
		json.NewEncoder(os.Stdout).Encode(rep)
		return
	}
	fmt.Printf("exec round trip (echo hi, HTTP API), n=%d each\n", rep.Local.N)
	fmt.Printf("  local (host=gateway): median %.2f ms  p90 %.2f ms\n", rep.Local.MedianMs, rep.Local.P90Ms)
	fmt.Printf("  via node:             median %.2f ms  p90 %.2f ms\n", rep.Node.MedianMs, rep.Node.P90Ms)
	fmt.Printf("  ratio node/local (median): %.2f\n", rep.RoundTripRatio)
	fmt.Printf("output throughput (%d bytes, foreground exec, median of %d)\n", rep.Bytes, *reps)
	fmt.Printf("  local: %.1f MB/s   via node: %.1f MB/s   ratio node/local: %.2f\n", rep.LocalMBps, rep.NodeMBps, rep.ThroughputRatio)
}

type report struct {
	Local           benchkit.Latency `json:"local"`
	Node            benchkit.Latency `json:"node"`
	RoundTripRatio  float64          `json:"roundTripRatio"`
	Bytes           int64            `json:"bytes"`
	LocalMBps       float64          `json:"localMBps"`
	NodeMBps        float64          `json:"nodeMBps"`
	ThroughputRatio float64          `json:"throughputRatio"`
}

type proc struct {
	cmd  *exec.Cmd
	home string
}

func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
	}
}

var listenRE = regexp.MustCompile(`listening on (http://[0-9.]+:\d+)`)

func run(bin string, n, block int, size int64, reps int) (*report, error) {
	tmp, err := os.MkdirTemp("", "nodebench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	gh, nh := filepath.Join(tmp, "gateway"), filepath.Join(tmp, "node")
	for _, h := range []string{gh, nh} {
		os.MkdirAll(h, 0o700)
		os.WriteFile(filepath.Join(h, "config.json"), []byte(`{"tools":{"exec":{"host":"gateway","security":"full","ask":"off","maxOutputChars":2000}}}`), 0o600)
	}
	// The gateway's own config allows both hosts per agent through exec
	// defaults; the node's policy lets everything run.
	gw := exec.Command(bin, "serve", "--home", gh, "--listen", "127.0.0.1:0", "--log-level", "warn")
	out, _ := gw.StdoutPipe()
	gw.Stderr = os.Stderr
	if err := gw.Start(); err != nil {
		return nil, err
	}
	g := &proc{cmd: gw, home: gh}
	defer g.stop()
	defer exec.Command("pkill", "-TERM", "-f", "supervise --home "+nh).Run()
	defer exec.Command("pkill", "-TERM", "-f", "supervise --home "+gh).Run()
	base := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
			break
		}
	}
	go io.Copy(io.Discard, out)
	if base == "" {
		return nil, fmt.Errorf("conch serve did not start")
	}
	tokb, err := os.ReadFile(filepath.Join(gh, "operator.token"))
	if err != nil {
		return nil, err
	}
	op := strings.TrimSpace(string(tokb))
	call := func(method, path string, body any) (map[string]any, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+op)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		if resp.StatusCode != 200 {
			return m, fmt.Errorf("%s %s: %d %v", method, path, resp.StatusCode, m)
		}
		return m, nil
	}
	inv, err := call("POST", "/v1/nodes/invites", map[string]any{"ttl": "1h"})
	if err != nil {
		return nil, err
	}
	nd := exec.Command(bin, "node", "--home", nh, "--gateway", base, "--token", inv["token"].(string), "--name", "bench", "--log-level", "warn")
	nd.Stdout, nd.Stderr = io.Discard, os.Stderr
	if err := nd.Start(); err != nil {
		return nil, err
	}
	node := &proc{cmd: nd, home: nh}
	defer node.stop()
	status := func() string {
		m, _ := call("GET", "/v1/nodes", nil)
		list, _ := m["nodes"].([]any)
		for _, x := range list {
			return x.(map[string]any)["status"].(string)
		}
		return ""
	}
	wait := func(st string) error {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if status() == st {
				return nil
			}
		}
		return fmt.Errorf("node never became %s", st)
	}
	if err := wait("pending"); err != nil {
		return nil, err
	}
	if _, err := call("POST", "/v1/nodes/bench/approve", nil); err != nil {
		return nil, err
	}
	if err := wait("connected"); err != nil {
		return nil, err
	}
	setHost := func(h string) error {
		_, err := call("PUT", "/v1/agents/main/exec-defaults", map[string]any{"host": h})
		return err
	}
	execOnce := func(cmd string) (time.Duration, error) {
		t0 := time.Now()
		m, err := call("POST", "/v1/exec", map[string]any{"command": cmd, "yieldMs": 120000})
		d := time.Since(t0)
		if err != nil {
			return 0, err
		}
		det, _ := m["details"].(map[string]any)
		if det["status"] != "completed" {
			return 0, fmt.Errorf("exec %q: %v", cmd, m)
		}
		return d, nil
	}
	// Warm up both sides.
	for _, h := range []string{"gateway", "node"} {
		setHost(h)
		for i := 0; i < 10; i++ {
			if _, err := execOnce("echo hi"); err != nil {
				return nil, err
			}
		}
	}
	var local, remote []time.Duration
	for len(local) < n || len(remote) < n {
		for _, side := range []string{"gateway", "node"} {
			if err := setHost(side); err != nil {
				return nil, err
			}
			for i := 0; i < block; i++ {
				d, err := execOnce("echo hi")
				if err != nil {
					return nil, err
				}
				if side == "gateway" && len(local) < n {
					local = append(local, d)
				} else if side == "node" && len(remote) < n {
					remote = append(remote, d)
				}
			}
		}
	}
	rep := &report{Local: benchkit.Summarize(local), Node: benchkit.Summarize(remote), Bytes: size}
	rep.RoundTripRatio = benchkit.Ratio(rep.Node.MedianMs, rep.Local.MedianMs)
	big := fmt.Sprintf("yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz012345678 | head -c %d", size)
	var lt, nt []time.Duration
	for i := 0; i < reps; i++ {
		for _, side := range []string{"gateway", "node"} {
			setHost(side)
			d, err := execOnce(big)
			if err != nil {
				return nil, err
			}
			if side == "gateway" {
				lt = append(lt, d)
			} else {
				nt = append(nt, d)
			}
		}
	}
	rep.LocalMBps = benchkit.MBps(size, benchkit.Median(lt))
	rep.NodeMBps = benchkit.MBps(size, benchkit.Median(nt))
	rep.ThroughputRatio = benchkit.Ratio(rep.NodeMBps, rep.LocalMBps)
	return rep, nil
}
