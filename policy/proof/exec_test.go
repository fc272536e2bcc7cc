package proof

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/host/shellenv"
	"github.com/conchsh/conch/policy"
)

// This file proves the safe-bin profiles by execution: it generates
// invocations of every profiled tool from its option table, asks Evaluate,
// and runs every invocation Evaluate allows under strace. An allowed
// invocation that opens, creates, renames, links or unlinks a path other
// than the dynamic loader's, the locale files and its own standard
// streams, runs another program, or does not end, is a failure that
// prints the invocation.
//
// go test runs a bounded number (safeBinExecBudget). A longer run:
//
//	CONCH_SAFEBIN_EXEC=20000 go test ./policy/proof -run TestSafeBinExecution -timeout 60m -v
//	go test ./policy/proof -run '^$' -fuzz FuzzSafeBinExec -fuzztime 30m

// allProfiled lists every tool with a built-in profile.
var allProfiled = []string{"cut", "uniq", "head", "tail", "tr", "wc", "grep", "sort", "jq"}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// safeBinExecBudget is how many allowed invocations go test runs.
const safeBinExecBudget = 200

// chooser draws the generator's choices: from a PRNG in the test, from
// the fuzzer's bytes in the fuzz target.
type chooser interface{ intn(n int) int }

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.IntN(n) }

// byteChooser reads choices from data; when it runs out it returns 0.
type byteChooser struct{ data []byte }

func (c *byteChooser) intn(n int) int {
	if len(c.data) == 0 || n <= 1 {
		return 0
	}
	v := int(c.data[0])
	c.data = c.data[1:]
	return v % n
}

// genValues are option values and operands: numbers, signs, words the
// tools know (follow modes, group methods, colour), names of files in the
// working directory, "-", the empty word and option look-alikes.
var genValues = []string{
	"1", "5", "-5", "+2", "0", "1,2", "1-3", "10k", "1.5", "K",
	"x", "in", "out", ".bash_profile", "etc/passwd", "sub/file",
	"-", "", "--", "-x", "-n", "--group", "=",
	"name", "descriptor", "separate", "append", "prepend", "both", "none",
	"always", "never", "auto", "quiet", "diagnose-first", "text", "binary", "read", "skip",
	"a-z", "A-Z", ",", ":", ".", ".a", "env", "1 2", "f", "lf", "F",
}

// genEnvs are environments an agent may give a command: locale and
// temporary directory. The variables that change how GNU tools read their
// arguments are refused for host commands (parsingEnv, checked below).
var genEnvs = [][]string{nil, nil, {"LC_ALL=C"}, {"LANG=C", "TMPDIR=."}}

// parsingEnv change how GNU tools parse the arguments the gate judged:
// POSIXLY_CORRECT stops option parsing at the first operand;
// _POSIX2_VERSION=199209 makes `tail -c 5` read the file "5". Host
// commands never get them.
var parsingEnv = []string{"POSIXLY_CORRECT", "_POSIX2_VERSION"}

// TestParsingEnvRefused: the environment the execution proof leaves out
// cannot reach a host command, neither inherited nor from a request.
func TestParsingEnvRefused(t *testing.T) {
	for _, k := range parsingEnv {
		if msg := shellenv.Validate(map[string]string{k: "1"}); msg == "" {
			t.Errorf("a request may set %s", k)
		}
		if got := shellenv.Inherit([]string{k + "=1"}); len(got) != 0 {
			t.Errorf("host commands inherit %s", k)
		}
	}
}

// genInvocation returns the arguments of one invocation of tool: options
// from its table (long, abbreviated, with "=value", short, clustered, with
// attached or separate values), "-", "", "--", obsolete counts, operands
// and odd values, in any order.
func genInvocation(tool string, c chooser) []string {
	t := policy.OptionTables[tool]
	value := func() string { return genValues[c.intn(len(genValues))] }
	var longs, shorts, valued []policy.Option
	for _, o := range t.Options {
		if o.Long != "" {
			longs = append(longs, o)
			if o.Arg != policy.NoArg {
				valued = append(valued, o) // drawn more often: where grammars differ
			}
		}
		if o.Short != "" {
			shorts = append(shorts, o)
		}
	}
	var args []string
	n := 1 + c.intn(5)
	for range n {
		switch k := c.intn(12); {
		case k < 4 && len(longs) > 0:
			o := longs[c.intn(len(longs))]
			if len(valued) > 0 && c.intn(2) == 0 {
				o = valued[c.intn(len(valued))]
			}
			name := o.Long
			if c.intn(3) == 0 {
				name = name[:1+c.intn(len(name))] // abbreviation
			}
			form := c.intn(3)
			if o.Arg == policy.OptionalArg && c.intn(2) == 0 {
				form = 1 // a separate word after an optional argument
			}
			switch form {
			case 0:
				args = append(args, "--"+name+"="+value())
			case 1:
				args = append(args, "--"+name, value())
			default:
				args = append(args, "--"+name)
			}
		case k < 7 && len(shorts) > 0:
			w := "-"
			for range 1 + c.intn(3) {
				w += shorts[c.intn(len(shorts))].Short
			}
			switch c.intn(3) {
			case 0:
				w += value()
			case 1:
				args = append(args, w, value())
				continue
			}
			args = append(args, w)
		case k == 7:
			args = append(args, "-"+strconv.Itoa(c.intn(20)))
		case k == 8:
			args = append(args, []string{"-", "", "--"}[c.intn(3)])
		default:
			args = append(args, value())
		}
	}
	// Shuffle sometimes: getopt permutes, so order must not matter.
	if c.intn(4) == 0 && len(args) > 1 {
		i, j := c.intn(len(args)), c.intn(len(args))
		args[i], args[j] = args[j], args[i]
	}
	return args
}

// execHarness runs allowed invocations under strace.
type execHarness struct {
	strace string
	dir    string // parent of the per-run directories
	stdin  string // a small input file
	home   string // HOME of the tools (jq looks for ~/.jq)
}

// newExecHarness skips the test when strace is missing or cannot trace.
func newExecHarness(tb testing.TB) *execHarness {
	tb.Helper()
	path, err := exec.LookPath("strace")
	if err != nil {
		tb.Skip("strace is not installed: the safe-bin execution proof needs it (.ci/run installs it)")
	}
	if out, err := exec.Command(path, "-f", "-qq", "-o", os.DevNull, "true").CombinedOutput(); err != nil {
		tb.Skipf("strace cannot trace here (ptrace not permitted?): %v: %s", err, out)
	}
	dir := tb.TempDir()
	h := &execHarness{strace: path, dir: dir, stdin: filepath.Join(dir, "stdin"), home: filepath.Join(dir, "home")}
	var in strings.Builder
	for i := range 20 {
		fmt.Fprintf(&in, "{\"a\":%d,\"b\":\"x y\"}\tline %d\n", i%3, i%4)
	}
	if err := os.WriteFile(h.stdin, []byte(in.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Mkdir(h.home, 0o755); err != nil {
		tb.Fatal(err)
	}
	return h
}

// decide asks policy.Evaluate about tool with args, every profiled tool a safe bin
// and an allowlist that allows nothing; it returns the decision's pinned
// argv source for the report and whether it runs.
func (h *execHarness) decide(tool string, args []string, cwd string) (string, bool) {
	words := []string{tool}
	for _, a := range args {
		words = append(words, quote(a))
	}
	cmd := strings.Join(words, " ")
	d := policy.Evaluate(policy.Request{
		Command: cmd, Security: policy.SecurityAllowlist, Ask: policy.AskOff, SafeBins: allProfiled,
		Env: policy.Env{PATH: "/usr/bin:/bin", Cwd: cwd, Home: h.home},
	})
	return cmd, d.Outcome == policy.OutcomeRun
}

var (
	straceLine = regexp.MustCompile(`^(?:\d+\s+)?([a-z0-9_]+)\((.*)`)
	straceStr  = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	// straceWatched are the system calls that name a path the tool opens,
	// creates, renames, links, unlinks or runs.
	straceWatched = map[string]bool{
		"open": true, "openat": true, "openat2": true, "creat": true, "execve": true, "execveat": true,
		"rename": true, "renameat": true, "renameat2": true, "unlink": true, "unlinkat": true,
		"mkdir": true, "mkdirat": true, "rmdir": true, "truncate": true, "link": true, "linkat": true,
		"symlink": true, "symlinkat": true, "mknod": true, "mknodat": true, "chdir": true,
		"chmod": true, "fchmodat": true, "chown": true, "lchown": true, "fchownat": true,
		"utimensat": true, "utimes": true, "utime": true,
	}
)

// allowedPath: the dynamic loader and libraries, locale and gconv data,
// the CPU count (sort --parallel), the process's own memory map (grep's
// PCRE reads /proc/self/maps) and jq's optional library ~/.jq.
func (h *execHarness) allowedPath(p string) bool {
	for _, prefix := range []string{
		"/etc/ld.so.cache", "/etc/ld.so.preload",
		"/lib/", "/lib64/", "/lib32/", "/libx32/", "/usr/lib/", "/usr/lib64/", "/usr/lib32/", "/usr/libx32/",
		"/usr/share/locale/", "/usr/share/i18n/", "/sys/devices/system/cpu/",
	} {
		if strings.HasPrefix(p, prefix) {
			return !strings.Contains(p, "/../")
		}
	}
	return p == "/proc/self/maps" || p == filepath.Join(h.home, ".jq")
}

// run executes tool args under strace in a fresh directory holding files
// the generator names, and returns what it did that a safe bin must not.
func (h *execHarness) run(tool string, args []string, cwd string, env []string) []string {
	exe, err := exec.LookPath(tool)
	if err != nil {
		return []string{"lookup: " + err.Error()}
	}
	log := filepath.Join(cwd, ".strace")
	timeout := 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	argv := append([]string{"-f", "-qq", "-e", "trace=%file,%desc", "-o", log, "--", exe}, args...)
	cmd := exec.CommandContext(ctx, h.strace, argv...)
	cmd.Dir = cwd
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + h.home, "LANG=C.UTF-8", "TMPDIR=" + filepath.Join(cwd, "tmp")}, env...)
	if f, err := os.Open(h.stdin); err == nil {
		defer f.Close()
		cmd.Stdin = f
	}
	cmd.WaitDelay = 5 * time.Second
	_ = cmd.Run() // the tool's exit status does not matter, what it touched does
	var bad []string
	if ctx.Err() != nil {
		bad = append(bad, fmt.Sprintf("did not end within %v", timeout))
	}
	f, err := os.Open(log)
	if err != nil {
		return append(bad, "no strace log: "+err.Error())
	}
	defer f.Close()
	execs := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := straceLine.FindStringSubmatch(sc.Text())
		if m == nil || !straceWatched[m[1]] {
			continue
		}
		if strings.HasPrefix(m[1], "execve") {
			if execs++; execs == 1 {
				continue // the tool itself
			}
			bad = append(bad, sc.Text())
			continue
		}
		s := straceStr.FindStringSubmatch(m[2])
		if s == nil {
			continue // by descriptor only (fstat of an open fd)
		}
		if p := s[1]; p == "" || !h.allowedPath(p) {
			bad = append(bad, sc.Text())
		}
	}
	return bad
}

// workdir makes a fresh working directory with the files the generator
// names, so that reads of them succeed and writes are seen.
func (h *execHarness) workdir(tb testing.TB, i int) string {
	d := filepath.Join(h.dir, "run"+strconv.Itoa(i))
	for _, p := range []string{"x", "in", "out", ".bash_profile", "etc/passwd", "sub/file"} {
		full := filepath.Join(d, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("a\nb\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(d, "tmp"), 0o755); err != nil {
		tb.Fatal(err)
	}
	return d
}

func envPrefix(env []string) string {
	if len(env) == 0 {
		return ""
	}
	return strings.Join(env, " ") + " "
}

// safeBinExecSeeds are invocations every run executes when allowed: the
// reported bypasses and their neighbours.
var safeBinExecSeeds = [][]string{
	{"uniq", "--group", "-", "--group", ".bash_profile"},
	{"uniq", "--group", "etc/passwd"},
	{"uniq", "--all-repeated", "-", "out"},
	{"uniq", "--gr", "in", "out"},
	{"jq", "", "in"},
	{"jq", ".", "-"},
	{"head", "-", "in"},
	{"tail", "-f"},
	{"tail", "--follow=name", "in"},
	{"tail", "-5f"},
	{"tail", "-cf"},
	{"sort", "--compress-program=sh", "-S", "1"},
	{"sort", "--files0-from=in"},
	{"sort", "-T", "sub", "-S", "1"},
	{"grep", "-r", "-e", "x"},
	{"grep", "-e", "x", "--exclude-dir=sub", "-r"},
	{"wc", "--files0-from=-"},
	{"cut", "-f1", "--", "in"},
	{"tr", "a", "b", "--", "-"},
}

// optionalArgWords are the separate words the optional-argument pass puts
// after an option: the files of the working directory, stdin and an
// option look-alike.
var optionalArgWords = []string{"x", "in", "out", ".bash_profile", "etc/passwd", "sub/file", "-", "-n"}

// optionalArgInvocations are, for every option with an optional argument
// ([=ARG]) of every safe bin's table, under its full name, every
// abbreviation of two letters or more and its short name, each followed
// by a separate word (which the tool reads as an operand, never as the
// option's value), alone, repeated and before another operand. A gate
// that takes such a word for the value lets the tool read or write a file
// it never judged (`uniq --group etc/passwd`); drawn at random that is a
// few draws in hundreds, so every run emits them all.
func optionalArgInvocations() [][]string {
	var out [][]string
	for _, tool := range allProfiled {
		for _, o := range policy.OptionTables[tool].Options {
			if o.Arg != policy.OptionalArg {
				continue
			}
			var names []string
			for n := len(o.Long); n >= 2 && o.Long != ""; n-- {
				names = append(names, "--"+o.Long[:n])
			}
			if o.Short != "" {
				names = append(names, "-"+o.Short)
			}
			for _, name := range names {
				for _, w := range optionalArgWords {
					out = append(out,
						[]string{tool, name, w},
						[]string{tool, name, w, name, "out"},
						[]string{tool, name, w, "-"})
				}
			}
		}
	}
	return out
}

// TestOptionalArgPassCoversEveryTable: the pass above names every
// optional-argument option of every safe bin's table.
func TestOptionalArgPassCoversEveryTable(t *testing.T) {
	seen := map[string]bool{}
	for _, inv := range optionalArgInvocations() {
		seen[inv[0]+" "+inv[1]] = true
	}
	n := 0
	for _, tool := range allProfiled {
		for _, o := range policy.OptionTables[tool].Options {
			if o.Arg == policy.OptionalArg {
				n++
				if !seen[tool+" --"+o.Long] {
					t.Errorf("%s --%s: not in the optional-argument pass", tool, o.Long)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no safe bin has an optional-argument option: the pass proves nothing")
	}
}

// TestSafeBinExecution is the execution proof (see the top of the file).
// It runs the seed invocations, every optional-argument option with a separate word
// (optionalArgInvocations, the same in every run), and then generated
// invocations until
// safeBinExecBudget allowed ones have run (CONCH_SAFEBIN_EXEC overrides
// the budget, CONCH_SAFEBIN_SEED the generator's seed).
func TestSafeBinExecution(t *testing.T) {
	h := newExecHarness(t)
	budget := safeBinExecBudget
	if testing.Short() {
		budget = 60
	}
	if v, err := strconv.Atoi(os.Getenv("CONCH_SAFEBIN_EXEC")); err == nil && v > 0 {
		budget = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("CONCH_SAFEBIN_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (CONCH_SAFEBIN_SEED=%d reproduces this run), budget %d", seed, seed, budget)
	c := randChooser{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}

	type job struct {
		tool string
		args []string
		env  []string
		cmd  string
		dir  string
	}
	jobs := make(chan job)
	var mu sync.Mutex // guards failures and ran
	var failures []string
	ran := map[string]int{}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				bad := h.run(j.tool, j.args, j.dir, j.env)
				_ = os.RemoveAll(j.dir)
				mu.Lock()
				ran[j.tool]++
				if len(bad) > 0 {
					failures = append(failures, fmt.Sprintf("%s%s\n\t%s", envPrefix(j.env), j.cmd, strings.Join(bad, "\n\t")))
				}
				mu.Unlock()
			}
		}()
	}
	allowed, generated := 0, 0
	submit := func(tool string, args []string) {
		generated++
		cmd, ok := h.decide(tool, args, h.dir)
		if !ok {
			return
		}
		allowed++
		jobs <- job{tool, args, genEnvs[c.intn(len(genEnvs))], cmd, h.workdir(t, generated)}
	}
	for _, s := range safeBinExecSeeds {
		submit(s[0], s[1:])
	}
	for _, s := range optionalArgInvocations() {
		submit(s[0], s[1:])
	}
	fixed := allowed
	tools := sortedTools()
	for allowed < fixed+budget && generated < budget*100+len(optionalArgInvocations()) {
		tool := tools[c.intn(len(tools))]
		submit(tool, genInvocation(tool, c))
	}
	close(jobs)
	wg.Wait()
	t.Logf("generated %d invocations, %d allowed and run (%d of them seeds and the optional-argument pass): %v", generated, allowed, fixed, ran)
	for _, f := range failures {
		t.Errorf("an allowed safe-bin invocation did what a safe bin must not (file access, another program, no end):\n%s", f)
	}
	if allowed-fixed < budget/2 {
		t.Errorf("only %d of %d generated invocations were allowed: the generator no longer exercises the profiles", allowed, generated)
	}
}

// FuzzSafeBinExec drives the same generator with the fuzzer's bytes: the
// first byte picks the tool, the rest the invocation. Every allowed
// invocation runs under strace. Each input costs a process start, so run
// it with -parallel 2 on a small machine.
func FuzzSafeBinExec(f *testing.F) {
	h := newExecHarness(f)
	f.Add([]byte{7, 0, 0, 0, 0})
	f.Add([]byte("uniq --group - --group out"))
	f.Add([]byte{1, 3, 9, 200, 17, 4, 4, 4, 8, 1, 2})
	tools := sortedTools()
	var n int
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{data: data}
		tool := tools[c.intn(len(tools))]
		args := genInvocation(tool, c)
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		cmd, ok := h.decide(tool, args, h.dir)
		if !ok {
			return
		}
		dir := h.workdir(t, i)
		defer os.RemoveAll(dir)
		env := genEnvs[c.intn(len(genEnvs))]
		if bad := h.run(tool, args, dir, env); len(bad) > 0 {
			t.Fatalf("an allowed safe-bin invocation did what a safe bin must not (file access, another program, no end):\n%s%s\n\t%s", envPrefix(env), cmd, strings.Join(bad, "\n\t"))
		}
	})
}
