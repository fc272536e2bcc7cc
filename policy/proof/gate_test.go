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
	"testing"
	"time"

	"github.com/conchsh/conch/policy"
)

// This file is the execution proof of the whole gate: commands generated
// from the grammar the gate accepts (pipelines, &&, ||, ;, dispatch
// wrappers, shell -c scripts nested, quoting of names and words, safe
// bins, an allowlisted file reached by an absolute path, a relative path
// and PATH) are judged by Evaluate, and every allowed one runs as its
// pinned text under `bash -c` (as conch runs it) and `strace -f -e
// trace=execve,…`. Every program the run executes must be one the gate
// resolved and pinned for that command (a segment's wrappers, then its
// executable, a wrapper never after what it wraps, by the path it resolved, its realpath or the allowlist
// pattern), a wrapper before what it wraps, and in the order of the
// segments: nothing of a part after `;`, `&&` or `||` before something of
// the part before it (the segments of one pipeline run side by side), and
// what a shell's -c script names only in that shell's processes.
// Any other execve is a failure that prints the command.
//
// go test runs gateExecBudget allowed commands (a few seconds). A longer
// run:
//
//	CONCH_GATE_EXEC=5000 go test ./policy/proof -run TestGateExecution -timeout 60m -v
//
// CONCH_GATE_SEED=N repeats a run's draws (its seed is logged).

// gateExecBudget is how many allowed commands go test runs.
const gateExecBudget = 80

// gateEnv is the world the generated commands are judged and run in: a
// working directory with input files and an allowlisted program (a copy
// of echo) in bin/, which is also on PATH.
type gateEnv struct {
	h    *execHarness
	bash string
	dir  string // the working directory
	bin  string // dir/bin, on PATH
	path string // PATH of judge and run
	tool string // the allowlisted file: dir/bin/say
}

func newGateEnv(t *testing.T) *gateEnv {
	h := newExecHarness(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Skip("no echo binary")
	}
	g := &gateEnv{h: h, bash: bash, dir: h.workdir(t, 0)}
	g.bin = filepath.Join(g.dir, "bin")
	g.tool = filepath.Join(g.bin, "say")
	g.path = g.bin + ":/usr/bin:/bin"
	b, err := os.ReadFile(echo)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(g.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.tool, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return g
}

// gateAtoms are simple commands the gate allows on their own: the
// allowlisted echo and file, the safe bins reading stdin.
func (g *gateEnv) atoms() []string {
	return []string{
		"echo hi", "echo a b", "say hi", "./bin/say x", "bin/say y", quote(g.tool) + " z",
		"head -n 1", "wc -l", "tr a b", "cut -c 1", "sort -r", "uniq -c", "tail -n 1", "grep -e a", "jq -c .",
	}
}

// gateWords are words the generator quotes in every way bash reads them.
var gateWords = []string{"hi", "a b", "x'y", `q"r`, "$HOME", "*", "~", "{a,b}", "a\tb", "é", "-n", "--", ""}

// quoteWord writes w in one of the ways that mean w to bash.
func quoteWord(w string, c chooser) string {
	switch c.intn(4) {
	case 0:
		return quote(w)
	case 1:
		if !strings.ContainsAny(w, "\"\\$`!") {
			return `"` + w + `"`
		}
	case 2:
		if w != "" && !strings.ContainsAny(w, "'\"\\$`*~{}\t -") {
			return w[:1] + `""` + w[1:] // a quote inside a word
		}
	}
	return quote(w)
}

// genGateCommand returns a command of depth at most depth: a chain of
// pipelines of (possibly wrapped, possibly shell -c) atoms.
func (g *gateEnv) genGateCommand(c chooser, depth int) string {
	var b strings.Builder
	for i := range 1 + c.intn(3) {
		if i > 0 {
			b.WriteString([]string{" && ", " || ", " ; ", "; ", "\n"}[c.intn(5)])
		}
		for j := range 1 + c.intn(3) {
			if j > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(g.genSegment(c, depth))
		}
	}
	return b.String()
}

// genSegment returns one segment: an atom with quoted extra words, a
// wrapped atom, or a shell running a generated script.
func (g *gateEnv) genSegment(c chooser, depth int) string {
	switch k := c.intn(10); {
	case k < 2 && depth > 0:
		shell := []string{"bash", "sh", "dash", "/usr/bin/bash", "'bash'"}[c.intn(5)]
		return shell + " -c " + quote(g.genGateCommand(c, depth-1))
	case k < 4:
		return genWrapped(c)
	}
	atoms := g.atoms()
	a := atoms[c.intn(len(atoms))]
	if strings.HasPrefix(a, "echo ") || strings.Contains(a, "say") {
		name, rest, _ := strings.Cut(a, " ")
		if c.intn(3) == 0 && !strings.Contains(name, "/") {
			name = quoteWord(name, c) // 'echo', "echo", ec""ho
		}
		a = name + " " + rest
		for range c.intn(3) {
			a += " " + quoteWord(gateWords[c.intn(len(gateWords))], c)
		}
	}
	return a
}

// slot is one program the gate pinned: a segment's wrapper or executable.
type slot struct {
	paths []string // what execve may name: the resolved path, its realpath, the pattern
	scope int      // the shell segment whose -c script holds it; -1 for the command itself
	part  int      // the part's index in its chain
	seg   int      // the segment's index among all of the command's segments
	pos   int      // its place in the segment's chain (wrappers first)
	shell bool     // the executable of a segment with a -c script
	used  bool
}

// slots lists the programs the decision's parts pin, in the order of the
// segments; scope is the shell segment they belong to.
func slots(parts []policy.Part, scope int, seg *int) []*slot {
	var out []*slot
	for pi, p := range parts {
		for _, s := range p.Segments {
			n := *seg
			*seg++
			for wi, w := range s.Wrappers {
				out = append(out, &slot{paths: []string{w}, scope: scope, part: pi, seg: n, pos: wi})
			}
			paths := []string{s.Exe, s.RealPath}
			if s.Pattern != "" {
				paths = append(paths, s.Pattern)
			}
			out = append(out, &slot{paths: paths, scope: scope, part: pi, seg: n, pos: len(s.Wrappers), shell: len(s.Inner) > 0})
			out = append(out, slots(s.Inner, n, seg)...)
		}
	}
	return out
}

var (
	// An execve or a fork that returned, whole or, when another
	// process's call came in between, in two lines: "<unfinished ...>"
	// then "resumed".
	straceExecve     = regexp.MustCompile(`^(\d+)\s+execve\("((?:[^"\\]|\\.)*)".*\)\s+=\s+0$`)
	straceUnfinished = regexp.MustCompile(`^(\d+)\s+execve\("((?:[^"\\]|\\.)*)".*<unfinished \.\.\.>$`)
	straceResumed    = regexp.MustCompile(`^(\d+)\s+<\.\.\. execve resumed>.*\)\s+=\s+0$`)
	straceFork       = regexp.MustCompile(`^(\d+)\s+(?:<\.\.\. )?(?:clone3?|fork|vfork)\b.*\)\s+=\s+(\d+)$`)
)

// execEvent is one successful execve of the run.
type execEvent struct{ pid, path, line string }

// proc is what a process of the run is doing: the shell segment whose
// script it runs (scope) and the segment whose chain it is in (seg, -1
// none; at is the chain position reached).
type proc struct{ scope, seg, at int }

// runGate runs pinned under bash -c and strace, and returns each execve
// the decision does not account for.
func (g *gateEnv) runGate(d policy.Decision, cwd string) []string {
	log := filepath.Join(cwd, ".strace")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.h.strace, "-f", "-qq", "-e", "trace=execve,clone,clone3,fork,vfork", "-o", log, "--", g.bash, "-c", d.Pinned)
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=" + g.path, "HOME=" + g.h.home, "LANG=C.UTF-8"}
	if f, err := os.Open(g.h.stdin); err == nil {
		defer f.Close()
		cmd.Stdin = f
	}
	cmd.WaitDelay = 5 * time.Second
	_ = cmd.Run()
	var bad []string
	if ctx.Err() != nil {
		bad = append(bad, "did not end")
	}
	events, parent, err := readExecs(log)
	if err != nil {
		return append(bad, err.Error())
	}
	return append(bad, checkExecs(d, events, parent)...)
}

// readExecs reads an strace log: the successful execve calls in order,
// and each process's parent.
func readExecs(log string) ([]execEvent, map[string]string, error) {
	f, err := os.Open(log)
	if err != nil {
		return nil, nil, fmt.Errorf("no strace log: %w", err)
	}
	defer f.Close()
	var events []execEvent
	parent := map[string]string{}
	pending := map[string]string{} // pid → the path of its unfinished execve
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := straceFork.FindStringSubmatch(line); m != nil {
			parent[m[2]] = m[1]
		} else if m := straceUnfinished.FindStringSubmatch(line); m != nil {
			pending[m[1]] = m[2]
		} else if m := straceResumed.FindStringSubmatch(line); m != nil {
			events = append(events, execEvent{m[1], pending[m[1]], m[1] + " execve(\"" + pending[m[1]] + "\") resumed = 0"})
		} else if m := straceExecve.FindStringSubmatch(line); m != nil {
			events = append(events, execEvent{m[1], m[2], line})
		}
	}
	return events, parent, sc.Err()
}

// checkExecs matches each execve to a program the decision pinned: in
// the scope of the process (the command, or the -c script of the shell
// segment an ancestor became), continuing the chain the process is in (a
// wrapper runs what it wraps, in the same process or a child) or starting
// a segment of a part not before the last part started in that scope.
// Programs of the same path in several segments make the match
// ambiguous, so it searches every assignment (a run has a few dozen
// execve calls); it reports the first execve no assignment explains. The
// first execve is the shell conch starts.
func checkExecs(d policy.Decision, events []execEvent, parent map[string]string) []string {
	seg := 0
	m := &matcher{all: slots(d.Analysis.Parts, -1, &seg), events: events, parent: parent}
	if len(events) == 0 {
		return nil
	}
	if m.search(1, map[string]proc{}, map[int]int{}) {
		return nil
	}
	if m.steps > matchSteps {
		return []string{fmt.Sprintf("no assignment found in %d steps", matchSteps)}
	}
	return []string{"not pinned here: " + events[m.deepest].line}
}

// matchSteps bounds the search of one run.
const matchSteps = 200000

type matcher struct {
	all     []*slot
	events  []execEvent
	parent  map[string]string
	steps   int
	deepest int // the first event the deepest attempt could not place
}

// state is pid's proc: its own, else its parent's (inherited at the fork).
func (m *matcher) state(procs map[string]proc, pid string) proc {
	for p := pid; p != ""; p = m.parent[p] {
		if st, ok := procs[p]; ok {
			return st
		}
	}
	return proc{scope: -1, seg: -1}
}

// search places events[i:] given procs and lastPart; it reports whether
// every one found a slot.
func (m *matcher) search(i int, procs map[string]proc, lastPart map[int]int) bool {
	if i == len(m.events) {
		return true
	}
	m.deepest = max(m.deepest, i)
	if m.steps++; m.steps > matchSteps {
		return false
	}
	e := m.events[i]
	p := m.state(procs, e.pid)
	for _, s := range m.all {
		if s.used || !contains(s.paths, e.path) {
			continue
		}
		if !(p.seg == s.seg && s.pos > p.at || p.seg != s.seg && s.scope == p.scope && s.part >= lastPart[s.scope] && firstFree(m.all, s)) {
			continue
		}
		next := proc{scope: p.scope, seg: s.seg, at: s.pos}
		if s.shell {
			next = proc{scope: s.seg, seg: -1}
		}
		procs2 := make(map[string]proc, len(procs)+1)
		for k, v := range procs {
			procs2[k] = v
		}
		procs2[e.pid] = next
		last2 := make(map[int]int, len(lastPart)+1)
		for k, v := range lastPart {
			last2[k] = v
		}
		last2[s.scope] = max(last2[s.scope], s.part)
		s.used = true
		if m.search(i+1, procs2, last2) {
			return true
		}
		s.used = false
	}
	return false
}

// firstFree reports whether nothing of s's segment has run yet, so that
// an execve may start the segment at s (at a wrapper, or past wrappers the
// pinned text drops: a bare env).
func firstFree(all []*slot, s *slot) bool {
	for _, o := range all {
		if o.seg == s.seg && o.used {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// gateSeeds run in every test: every shape once.
var gateSeeds = []string{
	"echo a && echo b || echo c ; echo d",
	"echo hi | head -n 1 | wc -l",
	"bash -c 'echo a; sh -c \"echo b | tr b c\"' | sort -r",
	"nice timeout 5 echo x && xargs echo",
	"say hi; ./bin/say x | bin/say y",
	"'echo' \"a b\" | ec\"ho\" x",
	"grep -e zzz || echo fallback",
}

// TestGateExecution is the execution proof of the whole gate (see the
// top of the file).
func TestGateExecution(t *testing.T) {
	g := newGateEnv(t)
	budget := gateExecBudget
	if testing.Short() {
		budget = 30
	}
	if v, err := strconv.Atoi(os.Getenv("CONCH_GATE_EXEC")); err == nil && v > 0 {
		budget = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("CONCH_GATE_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (CONCH_GATE_SEED=%d reproduces this run), budget %d", seed, seed, budget)
	c := randChooser{rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))}
	allow := []policy.AllowEntry{{Pattern: "/usr/bin/echo"}, {Pattern: g.tool}, {Pattern: "/usr/bin/bash"}}
	var failures []string
	allowed, generated, segments := 0, 0, 0
	try := func(command string) {
		generated++
		d := policy.Evaluate(policy.Request{
			Command: command, Security: policy.SecurityAllowlist, Ask: policy.AskOff, SafeBins: allProfiled,
			Allowlist: allow, Env: policy.Env{PATH: g.path, Cwd: g.dir, Home: g.h.home},
		})
		if d.Outcome != policy.OutcomeRun {
			return
		}
		allowed++
		n := 0
		segments += len(slots(d.Analysis.Parts, -1, &n))
		if bad := g.runGate(d, g.dir); len(bad) > 0 {
			failures = append(failures, fmt.Sprintf("%s\n\tpinned: %s\n\t%s", command, d.Pinned, strings.Join(bad, "\n\t")))
		}
	}
	for _, s := range gateSeeds {
		try(s)
	}
	if allowed != len(gateSeeds) {
		t.Errorf("only %d of the %d seeds are allowed: the proof no longer covers every shape", allowed, len(gateSeeds))
	}
	for allowed < budget && generated < budget*100 {
		try(g.genGateCommand(c, 2))
	}
	t.Logf("generated %d commands, %d allowed and run (%d pinned programs)", generated, allowed, segments)
	for _, f := range failures {
		t.Errorf("an allowed command executed a program the gate did not pin for it:\n%s", f)
	}
	if allowed < budget/2 {
		t.Errorf("only %d of %d generated commands were allowed: the generator no longer exercises the gate", allowed, generated)
	}
}

// TestGateExecutionDetects: the proof fails a run whose programs differ
// from the decision's, each way: another program, a program of a later
// part before one of an earlier part, a wrapper the decision did not
// pin, a -c script's program run outside its shell. Each decision is the
// gate's; its pinned text is replaced by one that does that.
func TestGateExecutionDetects(t *testing.T) {
	g := newGateEnv(t)
	for _, c := range []struct{ command, pinned string }{
		{"echo hi | head -n 1", "'/usr/bin/echo' hi | '/usr/bin/tail' -n 1"},
		{"echo a; wc -l", "'/usr/bin/wc' -l; '/usr/bin/echo' a"},
		{"echo a", "'/usr/bin/nice' '/usr/bin/echo' a"},
		{"bash -c 'wc -l' | echo a", "'/usr/bin/wc' -l | '/usr/bin/echo' a"},
		{"nice echo a", "'/usr/bin/echo' a; '/usr/bin/nice' '/usr/bin/echo' a"},
	} {
		d := policy.Evaluate(policy.Request{
			Command: c.command, Security: policy.SecurityAllowlist, Ask: policy.AskOff, SafeBins: allProfiled,
			Allowlist: []policy.AllowEntry{{Pattern: "/usr/bin/echo"}, {Pattern: "/usr/bin/bash"}},
			Env:       policy.Env{PATH: g.path, Cwd: g.dir, Home: g.h.home},
		})
		if d.Outcome != policy.OutcomeRun {
			t.Fatalf("%q: %s %s", c.command, d.Outcome, d.Reason)
		}
		if bad := g.runGate(d, g.dir); len(bad) != 0 {
			t.Fatalf("%q as pinned by the gate: %v", c.command, bad)
		}
		d.Pinned = c.pinned
		if bad := g.runGate(d, g.dir); len(bad) == 0 {
			t.Errorf("%q run as %q: not detected", c.command, c.pinned)
		}
	}
}
