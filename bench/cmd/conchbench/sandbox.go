package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/conchsh/conch/bench/internal/benchkit"
)

// goalSandboxRatio is the sandbox overhead goal: sandboxed exec "true"
// median ÷ gateway exec "true" median; goalRawRatio: bwrap-sandboxed exec
// "true" ÷ os/exec spawning bwrap with the same arguments (sameMounts;
// else rawBwrap) running the same shell.
const (
	goalSandboxRatio = 3.0
	goalRawRatio     = 1.5
)

// rawBwrap is the bare bubblewrap run the bwrap sandbox is compared with:
// the whole file system read-only, /dev and /proc, every namespace, and
// the login shell conch's sandboxed commands run under.
var rawBwrap = []string{"bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent", "sh", "-lc", "true"}

// sandboxOverhead compares exec "true" on host=sandbox (bwrap, and
// landlock where the kernel offers it) with exec "true" on the gateway,
// interleaved in the same run.
type sandboxOverhead struct {
	N             int               `json:"n"`
	Warmup        int               `json:"warmup"`
	Gateway       benchkit.Latency  `json:"gatewayTrue"`
	Bwrap         *benchkit.Latency `json:"bwrapTrue,omitempty"`
	BwrapRatio    float64           `json:"bwrapMedianRatio,omitempty"`
	Landlock      *benchkit.Latency `json:"landlockTrue,omitempty"`
	LandlockRatio float64           `json:"landlockMedianRatio,omitempty"`
	// Raw is os/exec spawning bwrap itself (rawBwrap), no conch: what
	// the bwrap sandbox costs at the least.
	Raw         *benchkit.Latency `json:"rawBwrap,omitempty"`
	RawArgv     []string          `json:"rawBwrapArgv,omitempty"`
	BwrapRawRat float64           `json:"bwrapRawMedianRatio,omitempty"`
	// Same is os/exec spawning bwrap with the bwrap sandbox's own
	// arguments (sameMounts): the mount list and namespaces of conch's
	// runs, without conch.
	Same         *benchkit.Latency `json:"sameMountsBwrap,omitempty"`
	SameArgv     []string          `json:"sameMountsBwrapArgv,omitempty"`
	BwrapSameRat float64           `json:"bwrapSameMountsMedianRatio,omitempty"`
	Skipped      []string          `json:"skipped,omitempty"`
	GoalRatio    float64           `json:"goalRatio"`
	GoalMet      bool              `json:"goalMet"`
}

func (r *run) sandboxOverhead() *sandboxOverhead {
	o := r.o
	progress("sandbox: %d warm-up + %d measured exec true calls per host", o.warmup, o.n)
	ws, err := os.MkdirTemp("", "conchbench-ws-")
	if err != nil {
		r.fail("sandbox: %v", err)
		return nil
	}
	defer os.RemoveAll(ws)
	type host struct {
		name string
		srv  *benchkit.Server
		d    []time.Duration
	}
	gw, err := benchkit.StartServer(r.ctx, o.conch, benchkit.ServerOptions{Name: "conchbench-gw", Config: `{"quotas":{"execPerSecond":0},"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`, Env: sameShell})
	if err != nil {
		r.fail("sandbox: gateway server: %v", err)
		return nil
	}
	defer gw.Close()
	hosts := []*host{{name: "gateway", srv: gw}}
	so := &sandboxOverhead{N: o.n, Warmup: o.warmup, GoalRatio: goalSandboxRatio}
	for _, backend := range []string{"bwrap", "landlock"} {
		if backend == "bwrap" {
			if _, err := exec.LookPath("bwrap"); err != nil {
				so.Skipped = append(so.Skipped, "bwrap: not installed")
				continue
			}
		}
		conf := fmt.Sprintf(`{"quotas":{"execPerSecond":0},"sandbox":{"mode":"all","backend":%q},"agents":{"main":{"workspace":%q}}}`, backend, ws)
		s, err := benchkit.StartServer(r.ctx, o.conch, benchkit.ServerOptions{Name: "conchbench-" + backend, Config: conf})
		if err != nil {
			r.fail("sandbox: %s server: %v", backend, err)
			continue
		}
		defer s.Close()
		res, err := s.Call(r.ctx, callLimit, "exec", map[string]any{"command": "true"})
		if err != nil || res.Completed("exec true") != nil {
			so.Skipped = append(so.Skipped, fmt.Sprintf("%s: unusable here (%v %s)", backend, err, benchkit.Clip(res.Text, 200)))
			continue
		}
		hosts = append(hosts, &host{name: backend, srv: s})
	}
	var raw, same []time.Duration
	var sameArgv []string
	haveBwrap := false
	for _, h := range hosts {
		if h.name == "bwrap" {
			haveBwrap = true
			if sameArgv, err = sameMounts(r, h.srv, ws); err != nil {
				so.Skipped = append(so.Skipped, fmt.Sprintf("bwrap with the sandbox's own mounts: %v", err))
			}
		}
	}
	// The raw runs get the environment of conch's sandboxed runs: above
	// all a HOME without the bench runner's own ~/.profile, which the
	// login shell would run (root's here runs mesg and sources a file:
	// 20 ms more in bwrap with --new-session).
	rawHome, err := os.MkdirTemp("", "conchbench-rawhome-")
	if err != nil {
		r.fail("sandbox: %v", err)
		return nil
	}
	defer os.RemoveAll(rawHome)
	rawEnv := func(home string) []string {
		return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8"}
	}
	spawn := func(argv []string, into *[]time.Duration, i int) error {
		cmd := exec.CommandContext(r.ctx, argv[0], argv[1:]...)
		cmd.Env = rawEnv(rawHome)
		if len(argv) > 0 && !slices.Equal(argv, rawBwrap) {
			cmd.Env = rawEnv("/home/conch") // the scope home, mounted there
		}
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(t0)
		if err != nil {
			return fmt.Errorf("raw %v: %v %s", argv, err, out)
		}
		if i >= o.warmup {
			*into = append(*into, d)
		}
		return nil
	}
	for i := range o.warmup + o.n {
		// The two raw runs take turns at going first: a bwrap run right
		// after another may wait for the kernel to tear down the
		// namespaces of the one before.
		type rawRun struct {
			argv []string
			into *[]time.Duration
		}
		var runs []rawRun
		if haveBwrap {
			runs = append(runs, rawRun{rawBwrap, &raw})
		}
		if sameArgv != nil {
			runs = append(runs, rawRun{sameArgv, &same})
			if i%2 == 1 {
				runs[0], runs[1] = runs[1], runs[0]
			}
		}
		for _, rr := range runs {
			if err := spawn(rr.argv, rr.into, i); err != nil {
				r.fail("sandbox: %v", err)
				return nil
			}
		}
		for _, h := range hosts {
			t0 := time.Now()
			res, err := h.srv.Call(r.ctx, callLimit, "exec", map[string]any{"command": "true"})
			d := time.Since(t0)
			if err == nil {
				err = res.Completed("exec true on " + h.name)
			}
			if err != nil {
				r.fail("sandbox: %v", err)
				return nil
			}
			if i >= o.warmup {
				h.d = append(h.d, d)
			}
		}
	}
	so.Gateway = benchkit.Summarize(hosts[0].d)
	if len(raw) > 0 {
		l := benchkit.Summarize(raw)
		so.Raw, so.RawArgv = &l, rawBwrap
	}
	if len(same) > 0 {
		l := benchkit.Summarize(same)
		so.Same, so.SameArgv = &l, sameArgv
	}
	so.GoalMet = true
	for _, h := range hosts[1:] {
		l := benchkit.Summarize(h.d)
		ratio := benchkit.Ratio(l.MedianMs, so.Gateway.MedianMs)
		if ratio > goalSandboxRatio {
			so.GoalMet = false
		}
		switch h.name {
		case "bwrap":
			so.Bwrap, so.BwrapRatio = &l, ratio
			// The goal is against bwrap with the same arguments when
			// they could be had, else against the bare raw run.
			if so.Raw != nil {
				so.BwrapRawRat = benchkit.Ratio(l.MedianMs, so.Raw.MedianMs)
			}
			if so.Same != nil {
				so.BwrapSameRat = benchkit.Ratio(l.MedianMs, so.Same.MedianMs)
				if so.BwrapSameRat > goalRawRatio {
					so.GoalMet = false
				}
			} else if so.Raw != nil && so.BwrapRawRat > goalRawRatio {
				so.GoalMet = false
			}
		case "landlock":
			so.Landlock, so.LandlockRatio = &l, ratio
		}
	}
	return so
}

func printSandbox(w io.Writer, so *sandboxOverhead) {
	fmt.Fprintf(w, "\n5. Sandbox overhead: exec {command:\"true\"} per host (N=%d each after %d warm-up, interleaved)\n", so.N, so.Warmup)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tmedian\tp90\tp99\tmin\tmax\t\n")
	row := func(name string, l benchkit.Latency) {
		fmt.Fprintf(tw, "%s\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f ms\t\n", name, l.MedianMs, l.P90Ms, l.P99Ms, l.MinMs, l.MaxMs)
	}
	row("   host=gateway", so.Gateway)
	if so.Bwrap != nil {
		row("   host=sandbox, bwrap", *so.Bwrap)
	}
	if so.Landlock != nil {
		row("   host=sandbox, landlock", *so.Landlock)
	}
	if so.Raw != nil {
		row("   bwrap … sh -lc true (os/exec, no conch)", *so.Raw)
	}
	if so.Same != nil {
		row("   bwrap, the sandbox's arguments, sh -lc true (os/exec)", *so.Same)
	}
	tw.Flush()
	if so.Bwrap != nil {
		fmt.Fprintf(w, "   median ratio, bwrap ÷ gateway:    %.2fx  (goal ≤ %.0fx)\n", so.BwrapRatio, so.GoalRatio)
	}
	if so.Landlock != nil {
		fmt.Fprintf(w, "   median ratio, landlock ÷ gateway: %.2fx  (goal ≤ %.0fx)\n", so.LandlockRatio, so.GoalRatio)
	}
	if so.Raw != nil && so.Same == nil {
		fmt.Fprintf(w, "   median ratio, bwrap ÷ raw bwrap:  %.2fx  (goal ≤ %.1fx)\n", so.BwrapRawRat, goalRawRatio)
	}
	if so.Same != nil {
		if so.Raw != nil {
			fmt.Fprintf(w, "   median ratio, bwrap ÷ raw bwrap:  %.2fx\n", so.BwrapRawRat)
		}
		fmt.Fprintf(w, "   median ratio, bwrap ÷ raw bwrap with the sandbox's arguments: %.2fx  (goal ≤ %.1fx)\n", so.BwrapSameRat, goalRawRatio)
	}
	for _, s := range so.Skipped {
		fmt.Fprintf(w, "   skipped %s\n", s)
	}
	fmt.Fprintf(w, "   goal: %s\n", goal(so.GoalMet))
}

// sameMounts returns the argv of a raw bwrap run with the bwrap sandbox's
// own arguments: those of a session the server ran (its meta.json), from
// bwrap on, running sh -lc true. A root gateway starts bwrap from a stage
// (sandbox-init --stage) whose idmapped views of the workspace, the scope
// home and the init (under /run/conch-sandbox) exist only inside it: they
// are mapped back to the host paths the stage names. The descriptors
// only the supervisor passes (--block-fd, --seccomp) are left out.
func sameMounts(r *run, s *benchkit.Server, ws string) ([]string, error) {
	res, err := s.Call(r.ctx, callLimit, "exec", map[string]any{"command": "sleep 30", "background": true})
	if err != nil {
		return nil, err
	}
	id := res.Str("sessionId")
	if id == "" {
		return nil, fmt.Errorf("no session for a background run: %s", benchkit.Clip(res.Text, 200))
	}
	defer s.Call(r.ctx, callLimit, "process", map[string]any{"action": "kill", "sessionId": id})
	var meta struct {
		Argv []string `json:"argv"`
	}
	path := filepath.Join(s.Home, "sessions", id, "meta.json")
	for deadline := time.Now().Add(30 * time.Second); ; {
		b, err := os.ReadFile(path)
		if err == nil && json.Unmarshal(b, &meta) == nil && len(meta.Argv) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no argv in %s: %v", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	argv := meta.Argv
	from := -1
	views := map[string]string{}
	for i, a := range argv {
		if a == "--stage" && i+1 < len(argv) {
			var st struct{ WS, Home, Exe string }
			if b, err := base64.StdEncoding.DecodeString(argv[i+1]); err == nil {
				json.Unmarshal(b, &st)
			}
			views = map[string]string{"/run/conch-sandbox/ws": st.WS, "/run/conch-sandbox/home": st.Home, "/run/conch-sandbox/conch": st.Exe}
		}
		if filepath.Base(a) == "bwrap" {
			from = i
			break
		}
	}
	if from < 0 {
		return nil, fmt.Errorf("no bwrap in %q", argv)
	}
	var out []string
	rest := argv[from:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--block-fd" || a == "--seccomp" || a == "--sync-fd" || a == "--info-fd":
			i++
			continue
		case a == "--":
			out = append(out, "--", "sh", "-lc", "true")
			return out, nil
		}
		if v, ok := views[a]; ok && v != "" {
			a = v
		} else if strings.HasPrefix(a, "/run/conch-sandbox/") {
			return nil, fmt.Errorf("no host path for %s", a)
		}
		out = append(out, a)
	}
	return nil, fmt.Errorf("no command in %q", argv)
}
