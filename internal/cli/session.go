package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/conchsh/conch/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// sessionDocs are the usage line, summary and examples of each session
// command.
var sessionDocs = map[string][3]string{
	"poll":   {"poll ID [--since C] [--timeout MS] [--raw]", "Print a session's new output and state (process poll)", "  conch poll calm-gulf\n  conch poll calm-gulf --timeout 5000"},
	"log":    {"log ID [--offset N] [--limit N] [--since C] [-f] [--raw] [--stream S] [--format text|asciicast]", "Print a session's output (process log); -f follows it", "  conch log calm-gulf -f\n  conch log calm-gulf --offset 0 --limit 50\n  conch log calm-gulf --format asciicast > s.cast"},
	"wait":   {"wait ID [--until U[,U...]] [--pattern RE] [-i] [--since C] [--host H] [--port P] [--url U] [--path P] [--idle MS] [--timeout MS]", "Wait for a session's end, a pattern, a port, a URL, a file or idleness (process wait)", "  conch wait calm-gulf\n  conch wait calm-gulf --until port --port 8080 --timeout 60000\n  conch wait calm-gulf --until regex --pattern 'listening on'"},
	"search": {"search ID PATTERN [-i] [-C N] [--max N] [--since C]", "Search a session's output for a regular expression (process search)", "  conch search calm-gulf 'error|FAIL' -i -C 2"},
	"screen": {"screen ID", "Print what a PTY session's terminal shows (process screen)", "  conch screen calm-gulf"},
	"send":   {"send ID [--data S] [--eof] [--keys K,K] [--hex H,H] [--literal S] [--paste S] [--no-bracket] [--submit] [--delay MS]", "Send input, keys or a paste to a session (process write, send-keys, paste, submit)", "  conch send calm-gulf --keys C-c\n  conch send calm-gulf --data 'yes' --submit"},
	"kill":   {"kill ID", "Kill a session's process tree; the session and its log stay (process kill)", "  conch kill calm-gulf"},
	"clear":  {"clear ID", "Delete a finished session: its record and its output log (process clear)", "  conch clear calm-gulf"},
	"rm":     {"rm ID", "Delete a session and its output log, killing it first if it runs (process remove)", "  conch rm calm-gulf"},
}

// optNum is a number flag that remembers whether it was given.
type optNum struct {
	v   float64
	set bool
}

func (n *optNum) String() string {
	if n == nil || !n.set {
		return ""
	}
	return strconv.FormatFloat(n.v, 'f', -1, 64)
}

func (n *optNum) Type() string { return "number" }

func (n *optNum) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("not a finite number")
	}
	n.v, n.set = f, true
	return nil
}

func (n *optNum) put(p map[string]any, key string) {
	if n.set {
		p[key] = n.v
	}
}

// runSessionCommand runs the commands that act on one session: poll, log,
// wait, search, screen, send, kill, clear and rm.
func (a *app) sessionCmds() []*cobra.Command {
	var cmds []*cobra.Command
	for _, name := range []string{"poll", "log", "wait", "search", "screen", "send", "kill", "clear", "rm"} {
		cmds = append(cmds, a.sessionCmd(name))
	}
	return cmds
}

func (a *app) sessionCmd(name string) *cobra.Command {
	doc := sessionDocs[name]
	want := []string{"ID"}
	if name == "search" {
		want = []string{"ID", "PATTERN"}
	}
	cmd := &cobra.Command{Use: doc[0], Short: doc[1], Example: doc[2], Args: args(want...)}
	fs := cmd.Flags()
	stdout, stderr := a.stdout, a.stderr
	g := addGlobalFlags(fs)
	f := &sessionFlags{name: name, fs: fs}
	f.register()
	cmd.RunE = a.runs(func(cmd *cobra.Command, pos []string) int {
		id := pos[0]
		if name == "log" && f.format != "text" {
			return f.recording(g, id, stdout, stderr)
		}
		calls, ok := f.calls(id, pos, stderr)
		if !ok {
			return ExitUsage
		}
		return f.run(g, id, calls, stdout, stderr)
	})
	return cmd
}

// sessionFlags are the flags of one session command (name), set by
// cobra.
type sessionFlags struct {
	name                                                       string
	fs                                                         *pflag.FlagSet
	since, timeout, offset, limit, port, idle, context_, max_  optNum
	delay                                                      optNum
	raw, follow, ignoreCase, eof, noBracket, submit            bool
	stream, until, pattern, host, url, path, data, keys, hexes string
	literal, paste, format                                     string
}

// register declares the flags of f.name.
func (f *sessionFlags) register() {
	fs := f.fs
	switch f.name {
	case "poll":
		fs.Var(&f.since, "since", "journal cursor to read from (default: what this agent has not polled yet)")
		fs.Var(&f.timeout, "timeout", "wait up to this many milliseconds for the end")
		fs.BoolVar(&f.raw, "raw", false, "keep terminal escapes")
	case "log":
		fs.Var(&f.offset, "offset", "first line (0-based)")
		fs.Var(&f.limit, "limit", "number of lines")
		fs.Var(&f.since, "since", "journal cursor to read from")
		fs.BoolVarP(&f.follow, "follow", "f", false, "keep printing new output until the session ends")
		fs.BoolVar(&f.raw, "raw", false, "keep terminal escapes")
		fs.StringVar(&f.stream, "stream", "", "both, stdout or stderr")
		fs.StringVar(&f.format, "format", "text", "text, or asciicast: a PTY session's recording (asciicast v2) on stdout")
	case "wait":
		fs.StringVar(&f.until, "until", "", "exit (default), regex, port, http, file or idle; a comma list waits for the first")
		fs.StringVar(&f.pattern, "pattern", "", "regular expression (until regex)")
		fs.BoolVarP(&f.ignoreCase, "ignore-case", "i", false, "ignore case")
		fs.Var(&f.since, "since", "journal cursor: the output shown, and until regex, start after it (default: output not yet read; regex 0)")
		fs.StringVar(&f.host, "host", "", "host (until port; default 127.0.0.1)")
		fs.Var(&f.port, "port", "TCP port (until port)")
		fs.StringVar(&f.url, "url", "", "URL (until http)")
		fs.StringVar(&f.path, "path", "", "path (until file)")
		fs.Var(&f.idle, "idle", "milliseconds without output (until idle)")
		fs.Var(&f.timeout, "timeout", "give up after this many milliseconds (default 30000)")
	case "search":
		fs.BoolVarP(&f.ignoreCase, "ignore-case", "i", false, "ignore case")
		fs.VarP(&f.context_, "context", "C", "lines of context")
		fs.Var(&f.max_, "max", "matches returned")
		fs.Var(&f.since, "since", "journal cursor to search from")
	case "send":
		fs.StringVar(&f.data, "data", "", "text to write to stdin")
		fs.BoolVar(&f.eof, "eof", false, "close stdin after writing")
		fs.StringVar(&f.keys, "keys", "", "key tokens, comma-separated (Enter,C-c,Up,…)")
		fs.StringVar(&f.hexes, "hex", "", "bytes as hex, comma-separated")
		fs.StringVar(&f.literal, "literal", "", "text sent as keys, as is")
		fs.StringVar(&f.paste, "paste", "", "text to paste")
		fs.BoolVar(&f.noBracket, "no-bracket", false, "paste without bracketed-paste markers")
		fs.BoolVar(&f.submit, "submit", false, "then press Enter (CR on a terminal, LF on a pipe)")
		fs.Var(&f.delay, "delay", "milliseconds between key tokens")
	}
}

// recording is `conch log --format asciicast`: the whole recording, so
// no other flag of log applies.
func (f *sessionFlags) recording(g *globalFlags, id string, stdout, stderr io.Writer) int {
	if f.format != "asciicast" {
		fmt.Fprintf(stderr, "conch log: unknown --format %q (text or asciicast)\n", f.format)
		return ExitUsage
	}
	for _, fl := range []string{"offset", "limit", "since", "follow", "raw", "stream"} {
		if f.fs.Changed(fl) {
			fmt.Fprintf(stderr, "conch log: --format asciicast writes the whole recording; it takes no --%s\n", fl)
			return ExitUsage
		}
	}
	return writeRecording(g, id, stdout, stderr)
}

// calls builds the process calls of the command: one, or several for
// send. ok is false for a usage error, already printed.
func (f *sessionFlags) calls(id string, pos []string, stderr io.Writer) (calls []map[string]any, ok bool) {
	p := map[string]any{"sessionId": id}
	switch f.name {
	case "poll":
		p["action"] = "poll"
		f.since.put(p, "since")
		f.timeout.put(p, "timeout")
		if f.raw {
			p["raw"] = true
		}
	case "log":
		p["action"] = "log"
		f.offset.put(p, "offset")
		f.limit.put(p, "limit")
		f.since.put(p, "since")
		if f.raw {
			p["raw"] = true
		}
		if f.stream != "" {
			p["stream"] = f.stream
		}
	case "wait":
		f.waitParams(p)
	case "search":
		p["action"] = "search"
		p["pattern"] = pos[1]
		if f.ignoreCase {
			p["ignoreCase"] = true
		}
		f.context_.put(p, "context")
		f.max_.put(p, "max")
		f.since.put(p, "since")
	case "screen", "kill", "clear":
		p["action"] = f.name
	case "rm":
		p["action"] = "remove"
	case "send":
		calls = f.sendCalls(id)
		if len(calls) == 0 {
			fmt.Fprintln(stderr, "conch send: nothing to send (give --data, --eof, --keys, --hex, --literal, --paste or --submit)")
			return nil, false
		}
	}
	if calls == nil {
		calls = []map[string]any{p}
	}
	return calls, true
}

// waitParams fills in the parameters of wait.
func (f *sessionFlags) waitParams(p map[string]any) {
	p["action"] = "wait"
	if u := strings.Split(f.until, ","); len(u) > 1 {
		p["until"] = u
	} else if f.until != "" {
		p["until"] = f.until
	}
	for k, v := range map[string]string{"pattern": f.pattern, "host": f.host, "url": f.url, "path": f.path} {
		if v != "" {
			p[k] = v
		}
	}
	if f.ignoreCase {
		p["ignoreCase"] = true
	}
	f.since.put(p, "since")
	f.port.put(p, "port")
	f.idle.put(p, "idleMs")
	f.timeout.put(p, "timeout")
}

// sendCalls are the calls of send, in order: write, send-keys, paste,
// submit.
func (f *sessionFlags) sendCalls(id string) []map[string]any {
	var calls []map[string]any
	if f.fs.Changed("data") || f.eof {
		calls = append(calls, map[string]any{"action": "write", "sessionId": id, "data": f.data, "eof": f.eof})
	}
	if f.keys != "" || f.hexes != "" || f.literal != "" {
		c := map[string]any{"action": "send-keys", "sessionId": id}
		if f.keys != "" {
			c["keys"] = strings.Split(f.keys, ",")
		}
		if f.hexes != "" {
			c["hex"] = strings.Split(f.hexes, ",")
		}
		if f.literal != "" {
			c["literal"] = f.literal
		}
		f.delay.put(c, "delayMs")
		calls = append(calls, c)
	}
	if f.fs.Changed("paste") {
		calls = append(calls, map[string]any{"action": "paste", "sessionId": id, "text": f.paste, "bracketed": !f.noBracket})
	}
	if f.submit {
		calls = append(calls, map[string]any{"action": "submit", "sessionId": id})
	}
	return calls
}

// run sends the calls, prints each answer and returns the exit code.
func (f *sessionFlags) run(g *globalFlags, id string, calls []map[string]any, stdout, stderr io.Writer) int {
	name := f.name
	be, err := g.connect()
	if err != nil {
		fmt.Fprintf(stderr, "conch %s: %v\n", name, err)
		return exitForError(err)
	}
	defer be.close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var res client.Result
	for _, c := range calls {
		res, err = f.call(ctx, be, c)
		if err != nil {
			if ctx.Err() != nil {
				return ExitInterrupted
			}
			return printFailure(name, g, res, err, stdout, stderr)
		}
		switch {
		case g.json:
			printJSON(stdout, res)
		case name == "log" && f.follow && logEmpty(res):
			// Skip "(no output yet)": the output follows.
		default:
			printResultText(stdout, stderr, res.Text)
		}
	}
	switch {
	case name == "wait":
		return waitExitCode(decodeEnd(res), f.until)
	case name == "log" && f.follow:
		return followLog(ctx, be, g, res, id, followOpts{raw: f.raw, stream: f.stream}, stdout, stderr)
	}
	return ExitOK
}

// call sends one process call. A wait changes nothing, so one cut short
// by the engine going away (another CLI command's, which exited) is
// asked again of the engine that serves the home now. A wait answered
// "timeout" before its time is one whose engine stopped: it is asked
// again for the rest of its time, from the same output position, so
// nothing is lost.
func (f *sessionFlags) call(ctx context.Context, be *conn, c map[string]any) (client.Result, error) {
	res, err := be.Process(ctx, c)
	for retry := 0; f.name == "wait" && retry < 3 && ctx.Err() == nil; retry++ {
		if err != nil && transportError(err) {
			res, err = be.Process(ctx, c)
		} else if next := waitCutShort(c, res, err); next != nil {
			c = next
			res, err = be.Process(ctx, c)
		} else {
			break
		}
	}
	return res, err
}

// writeRecording is conch log --format asciicast: the session's recording
// on stdout.
func writeRecording(g *globalFlags, id string, stdout, stderr io.Writer) int {
	be, err := g.connect()
	if err != nil {
		fmt.Fprintf(stderr, "conch log: %v\n", err)
		return exitForError(err)
	}
	defer be.close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := be.Recording(ctx, id, stdout); err != nil {
		if ctx.Err() != nil {
			return ExitInterrupted
		}
		fmt.Fprintf(stderr, "conch log: %v\n", err)
		return exitForError(err)
	}
	return ExitOK
}

// logEmpty reports whether a log result holds no lines.
func logEmpty(r client.Result) bool {
	var d struct {
		TotalLines int `json:"totalLines"`
	}
	return r.Decode(&d) == nil && d.TotalLines == 0
}

// printResultText prints a result text: inline events on stderr, the rest
// on stdout.
func printResultText(stdout, stderr io.Writer, text string) {
	events, rest := splitEvents(text)
	for _, e := range events {
		fmt.Fprintln(stderr, e)
	}
	printText(stdout, rest)
}

// printFailure reports a failed call and returns its exit code.
func printFailure(name string, g *globalFlags, res client.Result, err error, stdout, stderr io.Writer) int {
	var ae *client.Error
	switch {
	case g.json && res.Details != nil:
		printJSON(stdout, res)
	case errors.As(err, &ae) && res.Text != "":
		_, text := splitEvents(res.Text)
		fmt.Fprintf(stderr, "conch %s: %s\n", name, text)
	default:
		fmt.Fprintf(stderr, "conch %s: %v\n", name, err)
	}
	return exitForError(err)
}

// waitExitCode maps a wait result to the exit code: with `--until exit`
// (the default) the command's status as exec reports it; otherwise 0 when
// the condition was met, 1 when the process ended (or asks for input)
// first, 124 on timeout.
func waitExitCode(d endDetails, until string) int {
	if until == "" || until == "exit" {
		if d.Outcome == "timeout" {
			return ExitTimeout
		}
		return execExitCode(d.end())
	}
	switch d.Outcome {
	case "met":
		return ExitOK
	case "timeout":
		return ExitTimeout
	}
	return ExitFailed
}

// followLog prints the output that follows a log result until the session
// ends (`conch log -f`).
func followLog(ctx context.Context, be *conn, g *globalFlags, res client.Result, id string, o followOpts, stdout, stderr io.Writer) int {
	d := decodeEnd(res)
	if d.Status != "running" && d.Status != "pending" {
		return ExitOK
	}
	o.since = d.Cursor
	_, err := be.follow(ctx, id, o, func(stream, text string) {
		if g.json {
			b, _ := json.Marshal(map[string]string{"stream": stream, "text": text})
			fmt.Fprintf(stdout, "%s\n", b)
			return
		}
		printChunk(stdout, stderr, stream, text)
	})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "conch log: %v\n", err)
		return exitForError(err)
	}
	return ExitOK
}

// waitCutShort is, for a wait answered "timeout" well before its timeout
// (the engine that served it stopped, as another CLI command's in-process
// engine does when that command exits), the same wait for the rest of the
// time from the same output position; nil for any other answer.
func waitCutShort(c map[string]any, res client.Result, err error) map[string]any {
	if err != nil {
		return nil
	}
	var d struct {
		Outcome   string   `json:"outcome"`
		ElapsedMs float64  `json:"elapsedMs"`
		Since     *float64 `json:"since"`
	}
	if json.Unmarshal(res.Details, &d) != nil || d.Outcome != "timeout" {
		return nil
	}
	timeout := 30000.0
	if t, ok := c["timeout"].(float64); ok {
		timeout = t
	}
	left := timeout - d.ElapsedMs
	if left < 1000 {
		return nil
	}
	next := maps.Clone(c)
	next["timeout"] = left
	if d.Since != nil {
		next["since"] = *d.Since
	}
	return next
}
