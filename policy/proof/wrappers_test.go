package proof

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/conchsh/conch/policy"
)

// This file extends the execution proof to the dispatch wrappers and to
// the pinned command as conch runs it: generated wrapper invocations
// around an allowlisted echo and the safe bins are judged by Evaluate, and
// every allowed one runs as its PINNED text under `bash -c`, under strace,
// once with pipes and once with a terminal as its standard streams (PTY
// mode: nohup writes nohup.out only then). A failure is a file opened
// other than the loader's, the locale's, libstdbuf (stdbuf preloads it)
// and /dev/null (xargs gives it to its command as stdin), or a program run
// that the pinned text does not name.

// wrapperOption is one option of a wrapper's complete command line (GNU
// coreutils 9, findutils 4.9), accepted by the policy or not.
type wrapperOption struct {
	short, long string
	arg         policy.ArgKind
}

var wrapperOptions = map[string][]wrapperOption{
	"env": {
		{"i", "ignore-environment", policy.NoArg}, {"0", "null", policy.NoArg}, {"u", "unset", policy.RequiredArg},
		{"C", "chdir", policy.RequiredArg}, {"S", "split-string", policy.RequiredArg}, {"v", "debug", policy.NoArg},
		{"", "block-signal", policy.OptionalArg}, {"", "default-signal", policy.OptionalArg},
		{"", "ignore-signal", policy.OptionalArg}, {"", "list-signal-handling", policy.NoArg},
	},
	"nice":  {{"n", "adjustment", policy.RequiredArg}},
	"nohup": {{"", "help", policy.NoArg}, {"", "version", policy.NoArg}},
	"stdbuf": {
		{"i", "input", policy.RequiredArg}, {"o", "output", policy.RequiredArg}, {"e", "error", policy.RequiredArg},
	},
	"timeout": {
		{"s", "signal", policy.RequiredArg}, {"k", "kill-after", policy.RequiredArg}, {"", "preserve-status", policy.NoArg},
		{"", "foreground", policy.NoArg}, {"v", "verbose", policy.NoArg},
	},
	"xargs": {
		{"0", "null", policy.NoArg}, {"a", "arg-file", policy.RequiredArg}, {"d", "delimiter", policy.RequiredArg},
		{"E", "", policy.RequiredArg}, {"e", "eof", policy.OptionalArg}, {"I", "", policy.RequiredArg},
		{"i", "replace", policy.OptionalArg}, {"L", "", policy.RequiredArg}, {"l", "max-lines", policy.OptionalArg},
		{"n", "max-args", policy.RequiredArg}, {"o", "open-tty", policy.NoArg}, {"P", "max-procs", policy.RequiredArg},
		{"p", "interactive", policy.NoArg}, {"", "process-slot-var", policy.RequiredArg},
		{"r", "no-run-if-empty", policy.NoArg}, {"s", "max-chars", policy.RequiredArg}, {"", "show-limits", policy.NoArg},
		{"t", "verbose", policy.NoArg}, {"x", "exit", policy.NoArg},
	},
}

// wrapperValues are option values: those of genValues plus signals,
// durations, buffer modes and names of the working directory's files.
var wrapperValues = append([]string{"KILL", "TERM", "1", "2s", "0", "L", "4K", "1000", "x", "in", "etc/passwd", "/etc/passwd", "sub"}, genValues...)

// innerCommands are what the wrappers run: echo is allowlisted, the others
// are safe bins.
var innerCommands = []string{"echo hi", "head -n 1", "wc -l", "tr a b", "uniq -c", "tail -n 1", "cut -c 1", "sort -r", "grep -e a", "jq -c ."}

// genWrapped returns a command of nested wrappers (1 to 3) around an
// inner command, each with 0 to 2 options drawn from its table.
func genWrapped(c chooser) string {
	names := make([]string, 0, len(wrapperOptions))
	for n := range wrapperOptions {
		names = append(names, n)
	}
	sortStrings(names)
	value := func() string { return wrapperValues[c.intn(len(wrapperValues))] }
	var words []string
	for range 1 + c.intn(3) {
		w := names[c.intn(len(names))]
		words = append(words, w)
		opts := wrapperOptions[w]
		for range c.intn(3) {
			o := opts[c.intn(len(opts))]
			switch {
			case o.short != "" && (o.long == "" || c.intn(2) == 0):
				switch {
				case o.arg == policy.NoArg:
					words = append(words, "-"+o.short)
				case c.intn(2) == 0:
					words = append(words, "-"+o.short+value())
				default:
					words = append(words, "-"+o.short, value())
				}
			default:
				name := o.long
				if c.intn(4) == 0 {
					name = name[:1+c.intn(len(name))]
				}
				switch {
				case o.arg == policy.NoArg:
					words = append(words, "--"+name)
				case c.intn(2) == 0:
					words = append(words, "--"+name+"="+value())
				default:
					words = append(words, "--"+name, value())
				}
			}
		}
		if w == "timeout" || c.intn(8) == 0 {
			words = append(words, []string{"5", "1.5", "2m", "--"}[c.intn(4)])
		}
		if w == "nice" && c.intn(3) == 0 {
			words = append(words, "-"+strconv.Itoa(c.intn(20)))
		}
	}
	words = append(words, innerCommands[c.intn(len(innerCommands))])
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " '") && i < len(words)-1 {
			words[i] = quote(w)
		}
	}
	return strings.Join(words, " ")
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// wrapperSeeds run in every test: the reported wrapper bypasses.
var wrapperSeeds = []string{
	"nohup echo hi",
	"nice nohup head -n 1",
	"xargs -a etc/passwd echo",
	"xargs --arg-file=/etc/passwd echo",
	"xargs -0a in echo",
	"xargs -p echo",
	"xargs -o echo",
	"env -C sub echo hi",
	"stdbuf -oL wc -l",
	"timeout -v 5 tr a b",
}

// decideWrapped judges cmd with echo allowlisted and every profiled tool
// a safe bin; it returns the pinned text when Evaluate allows it.
func decideWrapped(cmd, cwd, home string, terminal bool) (string, bool) {
	d := policy.Evaluate(policy.Request{
		Command: cmd, Security: policy.SecurityAllowlist, Ask: policy.AskOff, SafeBins: allProfiled,
		Allowlist: []policy.AllowEntry{{Pattern: "/usr/bin/echo"}}, Terminal: terminal,
		Env: policy.Env{PATH: "/usr/bin:/bin", Cwd: cwd, Home: home},
	})
	return d.Pinned, d.Outcome == policy.OutcomeRun
}

var (
	pinnedExe   = regexp.MustCompile(`'(/[^']*)'`)
	stracePid   = regexp.MustCompile(`^(\d+)\s`)
	straceClone = regexp.MustCompile(`^\d+\s+(?:clone3?|fork|vfork)\(.*\)\s+=\s+(\d+)`)
)

// runPinned runs pinned under `bash -c` and strace in cwd, its standard
// streams a PTY when terminal is set, else the stdin file and pipes. It
// returns what the run did that the pinned text does not say.
func (h *execHarness) runPinned(bash, pinned, cwd string, terminal bool) []string {
	log := filepath.Join(cwd, ".strace")
	limit := 20 * time.Second
	if terminal {
		limit = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.strace, "-f", "-qq", "-e", "trace=%file,%desc,%process", "-o", log, "--", bash, "-c", pinned)
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + h.home, "LANG=C.UTF-8", "TERM=dumb"}
	cmd.WaitDelay = 5 * time.Second
	var bad []string
	if terminal {
		ptmx, err := pty.Start(cmd)
		if err != nil {
			return []string{"pty: " + err.Error()}
		}
		// A line, then end-of-file for each reader of the terminal.
		_, _ = ptmx.Write([]byte("a b\n\x04\x04\x04\x04"))
		_, _ = io.Copy(io.Discard, ptmx) // until the terminal's last holder is gone
		ptmx.Close()
		_ = cmd.Wait()
	} else {
		if f, err := os.Open(h.stdin); err == nil {
			defer f.Close()
			cmd.Stdin = f
		}
		_ = cmd.Run()
	}
	// With a terminal, a command in a background process group (timeout
	// without --foreground puts its child in one) stops when it reads the
	// terminal, until the duration is over: not a file access.
	if ctx.Err() != nil && !terminal {
		bad = append(bad, "did not end")
	}
	named := map[string]bool{bash: true}
	for _, m := range pinnedExe.FindAllStringSubmatch(strings.ReplaceAll(pinned, `'\''`, "'"), -1) {
		named[m[1]] = true
	}
	f, err := os.Open(log)
	if err != nil {
		return append(bad, "no strace log: "+err.Error())
	}
	defer f.Close()
	// exe is what each process runs: the shell's own start-up (it looks
	// up the user, probes the terminal) is not the pinned command's doing.
	exe := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pid := ""
		if m := stracePid.FindStringSubmatch(line); m != nil {
			pid = m[1]
		}
		if m := straceClone.FindStringSubmatch(line); m != nil {
			exe[m[1]] = exe[pid]
			continue
		}
		m := straceLine.FindStringSubmatch(line)
		if m == nil || !straceWatched[m[1]] {
			continue
		}
		s := straceStr.FindStringSubmatch(m[2])
		if s == nil {
			continue
		}
		p := s[1]
		switch {
		case strings.HasPrefix(m[1], "execve"):
			if strings.Contains(line, "= -1 ") {
				continue
			}
			exe[pid] = p
			if !named[p] {
				bad = append(bad, line)
			}
		case exe[pid] == bash && (p == "/dev/tty" || p == "/etc/nsswitch.conf" || p == "/etc/passwd"):
		case p == "/proc/self/fd" && strings.HasSuffix(exe[pid], "/xargs"): // it closes inherited descriptors
		case p == "" || h.allowedPath(p) || p == "/dev/null" || strings.HasPrefix(p, "/usr/libexec/coreutils/libstdbuf"):
		default:
			bad = append(bad, line)
		}
	}
	for _, out := range []string{"nohup.out", filepath.Join(h.home, "nohup.out")} {
		if !filepath.IsAbs(out) {
			out = filepath.Join(cwd, out)
		}
		if _, err := os.Stat(out); err == nil {
			bad = append(bad, "wrote "+out)
			os.Remove(out)
		}
	}
	return bad
}

// TestWrapperExecution is the wrapper half of the execution proof (see
// the top of the file). CONCH_WRAPPER_EXEC sets how many allowed
// invocations run (default 60), CONCH_SAFEBIN_SEED the generator's seed.
func TestWrapperExecution(t *testing.T) {
	h := newExecHarness(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	budget := 60
	if v, err := strconv.Atoi(os.Getenv("CONCH_WRAPPER_EXEC")); err == nil && v > 0 {
		budget = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("CONCH_SAFEBIN_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (CONCH_SAFEBIN_SEED=%d reproduces this run), budget %d", seed, seed, budget)
	c := randChooser{rand.New(rand.NewPCG(seed, seed^0x51ed270b27a3f1c9))}
	var failures []string
	allowed, generated := 0, 0
	try := func(cmd string) {
		generated++
		for _, terminal := range []bool{false, true} {
			pinned, ok := decideWrapped(cmd, h.dir, h.home, terminal)
			if !ok {
				continue
			}
			allowed++
			dir := h.workdir(t, generated*2+map[bool]int{false: 0, true: 1}[terminal])
			if bad := h.runPinned(bash, pinned, dir, terminal); len(bad) > 0 {
				failures = append(failures, fmt.Sprintf("%s (terminal %v)\n\tpinned: %s\n\t%s", cmd, terminal, pinned, strings.Join(bad, "\n\t")))
			}
			_ = os.RemoveAll(dir)
		}
	}
	for _, s := range wrapperSeeds {
		try(s)
	}
	for _, s := range innerCommands {
		try(s) // unwrapped: the tools themselves with a terminal
	}
	for allowed < budget && generated < budget*200 {
		try(genWrapped(c))
	}
	t.Logf("generated %d wrapper invocations, %d runs allowed", generated, allowed)
	for _, f := range failures {
		t.Errorf("an allowed wrapper invocation did what its pinned text does not say:\n%s", f)
	}
	if allowed < budget/2 {
		t.Errorf("only %d of %d generated wrapper invocations were allowed: the generator no longer exercises the wrappers", allowed, generated)
	}
}
