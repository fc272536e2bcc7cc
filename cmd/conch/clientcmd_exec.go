package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"mvdan.cc/sh/v3/syntax"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/approvals"
)

// runExec is `conch exec [flags] -- CMD…` (interfaces.md §4): it runs a
// command, prints its output, follows it when it keeps running, waits for
// an approval when one is needed, and exits with the command's status
// (§4.1).
func runExec(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("exec", "exec [flags] -- CMD…", stderr)
	g := addGlobalFlags(fs)
	var workdir string
	fs.StringVar(&workdir, "C", "", "working directory (short for --workdir)")
	fs.StringVar(&workdir, "workdir", "", "working directory (default: the agent's configured workspace, else the current directory; with --gateway, the gateway's default)")
	env := envFlag{}
	fs.Var(env, "e", "set K=V in the command's environment (short for --env; repeat)")
	fs.Var(env, "env", "set K=V in the command's environment (repeat)")
	var yield, timeout optNum
	fs.Var(&yield, "yield", "milliseconds after which a still-running command is backgrounded, 0 to 120000 (default: the engine's, 10000)")
	var background, detach bool
	fs.BoolVar(&background, "b", false, "short for --background")
	fs.BoolVar(&background, "background", false, "start in the background; print the session id and exit")
	fs.Var(&timeout, "t", "short for --timeout")
	fs.Var(&timeout, "timeout", "timeout in seconds, 0 to 31536000; 0: none (default: the engine's)")
	pty := fs.Bool("pty", false, "run under a pseudo-terminal")
	host := fs.String("host", "", "where to run: sandbox, gateway or node")
	security := fs.String("security", "", "deny, allowlist or full (may only tighten the configured mode)")
	ask := fs.String("ask", "", "off, on-miss or always (may only tighten the configured mode)")
	node := fs.String("node", "", "node id, name or IP for --host node")
	elevated := fs.Bool("elevated", false, "request elevated mode")
	idem := fs.String("idempotency-key", "", "de-duplicate retries of this call (1-128 chars [A-Za-z0-9._:-])")
	fs.BoolVar(&detach, "d", false, "short for --detach")
	fs.BoolVar(&detach, "detach", false, "do not follow a command that keeps running: print its session id and exit 0")
	noWait := fs.Bool("no-wait", false, "when an approval is needed, print the session id and exit 75 instead of waiting")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitConchError
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "conch exec: no command (put it after --)")
		return exitConchError
	}
	command := fs.Arg(0)
	if fs.NArg() > 1 {
		command = shellJoin(fs.Args())
	}
	p := map[string]any{"command": command}
	if workdir != "" {
		p["workdir"] = workdir
	}
	if len(env) > 0 {
		p["env"] = map[string]string(env)
	}
	yield.put(p, "yieldMs")
	if background {
		p["background"] = true
	}
	timeout.put(p, "timeout")
	if set["pty"] {
		p["pty"] = *pty
	}
	for k, v := range map[string]string{"host": *host, "security": *security, "ask": *ask, "node": *node, "idempotencyKey": *idem} {
		if v != "" {
			p[k] = v
		}
	}
	if set["elevated"] {
		p["elevated"] = *elevated
	}

	be, err := g.connect()
	if err != nil {
		fmt.Fprintf(stderr, "conch exec: %v\n", err)
		return exitFor(err, exitConchError)
	}
	defer be.close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	x := &execRun{g: g, be: be, stdin: stdin, stdout: stdout, stderr: stderr, detach: detach || background, quiet: background, noWait: *noWait}
	return x.run(ctx, p)
}

// execRun is one `conch exec`.
type execRun struct {
	g              *globalFlags
	be             backend
	stdin          io.Reader
	stdout, stderr io.Writer
	detach         bool // print the session id instead of following
	quiet          bool // detaching needs no notice (--background)
	noWait         bool
}

func (x *execRun) run(ctx context.Context, p map[string]any) int {
	res, err := x.be.exec(ctx, p)
	var ae *client.Error
	if err != nil && (!errors.As(err, &ae) || res.Details == nil) {
		if ctx.Err() != nil {
			fmt.Fprintln(x.stderr, "conch exec: interrupted")
			return exitInterrupted
		}
		fmt.Fprintf(x.stderr, "conch exec: %v\n", err)
		return exitConchError
	}
	d := decodeEnd(res)
	if x.g.json {
		printJSON(x.stdout, res)
	} else {
		events, _ := splitEvents(res.Text)
		for _, e := range events {
			fmt.Fprintln(x.stderr, e)
		}
	}
	switch {
	case err != nil || d.Status == "error":
		if !x.g.json {
			_, text := splitEvents(res.Text)
			printText(x.stderr, text)
		}
		if d.Error != nil && d.Error.Code == "denied" || ae != nil && ae.Code == "denied" {
			return exitDenied
		}
		return exitConchError
	case d.Status == "completed" || d.Status == "failed":
		if !x.g.json {
			x.printOutcome(res, d)
		}
		return execExitCode(d.end())
	case d.Status == "running":
		return x.running(ctx, d.SessionID, d.Cursor)
	case d.Status == "approval-pending":
		return x.approval(ctx, res, d)
	}
	if !x.g.json {
		printText(x.stderr, res.Text)
	}
	return exitConchError
}

// printOutcome prints a finished run: its output on stdout, warnings and
// the reason of a failure on stderr.
func (x *execRun) printOutcome(res client.Result, d endDetails) {
	for _, w := range d.Warnings {
		fmt.Fprintln(x.stderr, w)
	}
	if d.Aggregated != nil {
		printText(x.stdout, *d.Aggregated)
	} else {
		// Node runs without streaming: the text is the output.
		_, text := splitEvents(res.Text)
		printText(x.stdout, text)
	}
	x.reportEnd(d.end())
}

// reportEnd says on stderr why a run that did not exit by itself ended.
func (x *execRun) reportEnd(e sessionEnd) {
	msg := e.Reason
	if msg == "" {
		sig := "SIGTERM"
		if e.Signal != nil {
			sig = *e.Signal
		}
		switch e.State {
		case "killed":
			who := "conch"
			if e.KilledBy != nil {
				who = *e.KilledBy
			}
			msg = fmt.Sprintf("Command killed by %s (signal %s)", who, sig)
		case "signaled":
			msg = "Command aborted by signal " + sig
		case "lost":
			msg = "Command lost: its supervisor ended without recording an exit status."
		}
	}
	if msg != "" {
		fmt.Fprintf(x.stderr, "conch exec: %s\n", msg)
	}
}

// running handles a run that keeps going: detach, or follow it to its end.
func (x *execRun) running(ctx context.Context, id string, cursor int64) int {
	if x.detach {
		if !x.g.json {
			fmt.Fprintln(x.stdout, id)
			if !x.quiet {
				fmt.Fprintf(x.stderr, "detached; session %s keeps running\n", id)
			}
		}
		return exitOK
	}
	if x.g.json {
		return x.waitJSON(ctx, id, cursor)
	}
	end, err := x.be.follow(ctx, id, followOpts{}, func(stream, text string) {
		printChunk(x.stdout, x.stderr, stream, text)
	})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(x.stderr, "detached; session %s keeps running\n", id)
			return exitOK
		}
		fmt.Fprintf(x.stderr, "conch exec: follow session %s: %v\n", id, err)
		return exitConchError
	}
	x.reportEnd(end)
	return execExitCode(end)
}

// waitJSON waits for the end of a session without printing its output,
// then prints the final poll result (the output after cursor and the end
// state) as JSON.
func (x *execRun) waitJSON(ctx context.Context, id string, cursor int64) int {
	for {
		r, err := x.be.process(ctx, map[string]any{"action": "poll", "sessionId": id, "since": float64(cursor), "timeout": 30000})
		if ctx.Err() != nil {
			fmt.Fprintf(x.stderr, "detached; session %s keeps running\n", id)
			return exitOK
		}
		if err != nil {
			if r.Details != nil {
				printJSON(x.stdout, r)
			} else {
				fmt.Fprintf(x.stderr, "conch exec: %v\n", err)
			}
			return exitConchError
		}
		d := decodeEnd(r)
		if d.Status == "running" || d.Status == "pending" {
			continue
		}
		printJSON(x.stdout, r)
		return execExitCode(d.end())
	}
}

// approval waits for the decision on an approval-pending run (or exits 75
// with --no-wait), then follows the run like any other.
func (x *execRun) approval(ctx context.Context, res client.Result, d endDetails) int {
	id := d.SessionID
	_, text := splitEvents(res.Text)
	if x.noWait {
		if !x.g.json {
			printText(x.stderr, text)
			fmt.Fprintln(x.stdout, id)
		}
		return exitNoWait
	}
	if !x.g.json {
		printText(x.stderr, text)
		fmt.Fprintf(x.stderr, "Waiting for a decision (conch approvals approve %s | conch approvals deny %s); Ctrl-C detaches.\n", d.ApprovalSlug, d.ApprovalSlug)
		if eng := x.be.local(); eng != nil && d.ApprovalID != "" {
			if in, ok := x.stdin.(*os.File); ok && isTerminal(in) && isTerminal(os.Stderr) {
				promptApproval(eng.Home(), d.ApprovalID, in, x.stderr)
			}
		}
	}
	for {
		r, err := x.be.process(ctx, map[string]any{"action": "poll", "sessionId": id, "timeout": 1000})
		if ctx.Err() != nil {
			fmt.Fprintf(x.stderr, "detached; session %s keeps running\n", id)
			return exitOK
		}
		if err != nil {
			if x.g.json && r.Details != nil {
				printJSON(x.stdout, r)
			} else {
				fmt.Fprintf(x.stderr, "conch exec: %v\n", err)
			}
			return exitConchError
		}
		pd := decodeEnd(r)
		if pd.Status == "pending" {
			continue
		}
		if pd.State == "denied" {
			if x.g.json {
				printJSON(x.stdout, r)
			} else {
				fmt.Fprintf(x.stderr, "conch exec: exec denied (%s)\n", pd.Reason)
			}
			return exitDenied
		}
		break
	}
	return x.running(ctx, id, 0)
}

// execExitCode maps how a run ended to the exit code of exec
// (interfaces.md §4.1).
func execExitCode(e sessionEnd) int {
	switch e.State {
	case "exited", "": // "": node runs without a session report only a code
		if e.ExitCode != nil {
			return *e.ExitCode
		}
	case "signaled", "killed":
		if e.KilledBy != nil && *e.KilledBy == "timeout" {
			return exitTimeout
		}
		if e.Signal != nil {
			if n := signalNumber(*e.Signal); n > 0 {
				return 128 + n // the shell's convention for a signal death
			}
		}
		if e.ExitCode != nil {
			return *e.ExitCode // killed, but it exited by itself in the grace period
		}
		return 128 + int(syscall.SIGTERM) // the kill sequence's first signal
	case "denied":
		return exitDenied
	}
	return exitConchError // lost, or no status at all
}

// signalNumber returns the number of a signal named "SIGTERM", "TERM" or
// "15", or 0.
func signalNumber(name string) int {
	if n, err := strconv.Atoi(name); err == nil {
		return n
	}
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	return int(unix.SignalNum(strings.ToUpper(name)))
}

// shellJoin quotes arguments for a POSIX shell and joins them with spaces.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if q, err := syntax.Quote(s, syntax.LangPOSIX); err == nil {
		return q
	}
	// A tab, a newline or another unprintable character: POSIX sh has no
	// escape for it (and bash's $'...' means something else to dash), but
	// single quotes keep every byte except NUL, which an argument cannot hold.
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// envFlag collects repeated K=V flags.
type envFlag map[string]string

func (e envFlag) String() string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (e envFlag) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("want K=V, got %q", kv)
	}
	e[k] = v
	return nil
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// promptApproval asks on the terminal for a decision on an approval of an
// in-process run and records it in the home's approvals store, where the
// engine picks it up. It returns at once; the question stays open until
// answered, or until the process exits because the approval was decided
// elsewhere.
func promptApproval(home, approvalID string, in io.Reader, out io.Writer) {
	go func() {
		r := bufio.NewReader(in)
		for {
			fmt.Fprint(out, "Allow once [o], always [a], deny [d]? ")
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			var d approvals.Decision
			switch strings.ToLower(strings.TrimSpace(line)) {
			case "o", "once", "allow-once":
				d = approvals.AllowOnce
			case "a", "always", "allow-always":
				d = approvals.AllowAlways
			case "d", "deny":
				d = approvals.Deny
			default:
				continue
			}
			user := os.Getenv("USER")
			if user == "" {
				user = strconv.Itoa(os.Getuid())
			}
			store, err := approvals.OpenStore(home)
			if err == nil {
				_, err = store.Decide(approvalID, d, "cli:"+user)
			}
			if err != nil {
				fmt.Fprintf(out, "conch exec: %v\n", err)
			}
			return
		}
	}()
}
