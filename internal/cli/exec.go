package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"mvdan.cc/sh/v3/syntax"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/client"
	"github.com/spf13/cobra"
)

func (a *app) execCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exec [flags] -- CMD...",
		Short: "Run a command through the engine and exit with its status",
		Long: `Run a command as an agent's exec tool call would: through the policy, under a
supervisor, in the agent's sandbox or on a node. One argument is shell text;
several are quoted and joined. Output goes to stdout, inline events and reasons
to stderr. A run still going after the yield window is followed to its end.
The exit status is the command's (see "Exit codes" in docs/cli.md; a bad
command line exits 125, as conch failing does).`,
		Example: `  conch exec -- make test
  conch exec -C ~/src/app -e CI=1 -- 'go test ./... | tail'
  conch exec -b -- ./server --port 8080     # background: prints the session id
  conch exec --pty -- htop                  # under a pseudo-terminal
  conch exec --no-wait -- rm -rf build      # exit 75 if an approval is needed`,
	}
	stopAtFirstArg(cmd)
	fs := cmd.Flags()
	g := addGlobalFlags(fs)
	var workdir string
	fs.StringVarP(&workdir, "workdir", "C", "", "working directory (default: the agent's configured workspace, else the current directory; with --gateway, the gateway's default)")
	env := envFlag{}
	fs.VarP(env, "env", "e", "set K=V in the command's environment (repeat)")
	var yield, timeout optNum
	fs.Var(&yield, "yield", "milliseconds after which a still-running command is backgrounded, 0 to 120000 (default: the engine's, 10000)")
	var background, detach bool
	fs.BoolVarP(&background, "background", "b", false, "start in the background; print the session id and exit")
	fs.VarP(&timeout, "timeout", "t", "timeout in seconds, 0 to 31536000; 0: none (default: the engine's)")
	pty := fs.Bool("pty", false, "run under a pseudo-terminal")
	host := fs.String("host", "", "where to run: sandbox, gateway or node")
	security := fs.String("security", "", "deny, allowlist or full (may only tighten the configured mode)")
	ask := fs.String("ask", "", "off, on-miss or always (may only tighten the configured mode)")
	node := fs.String("node", "", "node id, name or IP for --host node")
	elevated := fs.Bool("elevated", false, "request elevated mode")
	idem := fs.String("idempotency-key", "", "de-duplicate retries of this call (1-128 chars [A-Za-z0-9._:-])")
	fs.BoolVarP(&detach, "detach", "d", false, "do not follow a command that keeps running: print its session id and exit 0")
	noWait := fs.Bool("no-wait", false, "when an approval is needed, print the session id and exit 75 instead of waiting")
	cmd.RunE = a.runs(func(cmd *cobra.Command, args []string) int {
		if len(args) == 0 {
			fmt.Fprintln(a.stderr, "conch exec: no command (put it after --)")
			return ExitConchError
		}
		command := args[0]
		if len(args) > 1 {
			command = shellJoin(args)
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
		if fs.Changed("pty") {
			p["pty"] = *pty
		}
		for k, v := range map[string]string{"host": *host, "security": *security, "ask": *ask, "node": *node, "idempotencyKey": *idem} {
			if v != "" {
				p[k] = v
			}
		}
		if fs.Changed("elevated") {
			p["elevated"] = *elevated
		}
		be, err := g.connect()
		if err != nil {
			fmt.Fprintf(a.stderr, "conch exec: %v\n", err)
			return exitFor(err, ExitConchError)
		}
		defer be.close()
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		x := &execRun{g: g, be: be, stdin: a.stdin, stdout: a.stdout, stderr: a.stderr, detach: detach || background, quiet: background, noWait: *noWait}
		return x.run(ctx, p)
	})
	return cmd
}

// execRun is one `conch exec`.
type execRun struct {
	g              *globalFlags
	be             *conn
	stdin          io.Reader
	stdout, stderr io.Writer
	detach         bool // print the session id instead of following
	quiet          bool // detaching needs no notice (--background)
	noWait         bool
}

func (x *execRun) run(ctx context.Context, p map[string]any) int {
	res, err := x.be.Exec(ctx, p)
	var ae *client.Error
	if err != nil && (!errors.As(err, &ae) || res.Details == nil) {
		if ctx.Err() != nil {
			fmt.Fprintln(x.stderr, "conch exec: interrupted")
			return ExitInterrupted
		}
		fmt.Fprintf(x.stderr, "conch exec: %v\n", err)
		return ExitConchError
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
			return ExitDenied
		}
		return ExitConchError
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
	return ExitConchError
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
	reportLoss(x.stderr, "conch exec", e.Loss)
}

// reportLoss says on stderr how much of a session's output is gone for
// good, so that a run whose output was cut short never looks complete.
func reportLoss(w io.Writer, who string, l apitype.OutputLoss) {
	if l.DroppedBytes > 0 {
		fmt.Fprintf(w, "%s: warning: %d bytes of output were dropped by the journal cap and are gone for good\n", who, l.DroppedBytes)
	}
	if l.UnrecordedBytes > 0 {
		fmt.Fprintf(w, "%s: warning: %d bytes of output could not be recorded (the conch home is out of disk space or cannot be written) and are gone for good\n", who, l.UnrecordedBytes)
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
		return ExitOK
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
			return ExitOK
		}
		fmt.Fprintf(x.stderr, "conch exec: follow session %s: %v\n", id, err)
		return ExitConchError
	}
	x.reportEnd(end)
	return execExitCode(end)
}

// waitJSON waits for the end of a session without printing its output,
// then prints the final poll result (the output after cursor and the end
// state) as JSON.
func (x *execRun) waitJSON(ctx context.Context, id string, cursor int64) int {
	for {
		r, err := x.be.Process(ctx, map[string]any{"action": "poll", "sessionId": id, "since": float64(cursor), "timeout": 30000})
		if ctx.Err() != nil {
			fmt.Fprintf(x.stderr, "detached; session %s keeps running\n", id)
			return ExitOK
		}
		if err != nil {
			if r.Details != nil {
				printJSON(x.stdout, r)
			} else {
				fmt.Fprintf(x.stderr, "conch exec: %v\n", err)
			}
			return ExitConchError
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
			// The text above is the agent's (it names the process tool).
			if x.be.eng != nil {
				// This command's own engine holds the prepared run, and
				// it ends with this command: no later decision can run it.
				fmt.Fprintf(x.stderr, "No gateway serves this home (conch serve or conch mcp): the request is dropped when this command exits and nothing runs; start one, then run the command again to decide it later.\n")
			} else {
				fmt.Fprintf(x.stderr, "Decide: conch approvals approve %s | conch approvals deny %s; then follow it: conch wait %s\n", d.ApprovalSlug, d.ApprovalSlug, id)
			}
			fmt.Fprintln(x.stdout, id)
		}
		return ExitNoWait
	}
	if !x.g.json {
		printText(x.stderr, text)
		fmt.Fprintf(x.stderr, "Waiting for a decision (conch approvals approve %s | conch approvals deny %s); Ctrl-C detaches.\n", d.ApprovalSlug, d.ApprovalSlug)
		if eng := x.be.eng; eng != nil && d.ApprovalID != "" {
			if in, ok := x.stdin.(*os.File); ok && isTerminal(in) && isTerminal(os.Stderr) {
				promptApproval(eng.Home(), d.ApprovalID, in, x.stderr)
			}
		}
	}
	for cut := 0; ; {
		r, err := x.be.Process(ctx, map[string]any{"action": "poll", "sessionId": id, "timeout": 1000})
		if ctx.Err() != nil {
			fmt.Fprintf(x.stderr, "detached; session %s keeps running\n", id)
			return ExitOK
		}
		if transportError(err) && cut < 3 {
			// The engine went away mid-poll (another CLI command's,
			// which exited): poll the one serving the home now.
			cut++
			continue
		}
		if err != nil {
			if x.g.json && r.Details != nil {
				printJSON(x.stdout, r)
			} else {
				fmt.Fprintf(x.stderr, "conch exec: %v\n", err)
			}
			return ExitConchError
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
			return ExitDenied
		}
		break
	}
	return x.running(ctx, id, 0)
}

// execExitCode maps how a run ended to the exit code of exec.
func execExitCode(e sessionEnd) int {
	switch e.State {
	case "exited", "": // "": node runs without a session report only a code
		if e.ExitCode != nil {
			return *e.ExitCode
		}
	case "signaled", "killed":
		if e.KilledBy != nil && *e.KilledBy == "timeout" {
			return ExitTimeout
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
		return ExitDenied
	}
	return ExitConchError // lost, or no status at all
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
	return signalNum(strings.ToUpper(name))
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

func (e envFlag) Type() string { return "K=V" }

func (e envFlag) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("want K=V, got %q", kv)
	}
	e[k] = v
	return nil
}
