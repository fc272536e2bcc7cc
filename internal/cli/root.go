// Package cli is conch's command line: every command of the conch binary
// (serve, mcp, exec and the session commands, the operator commands) as a
// tree of cobra commands. cmd/conch only dispatches to Main.
//
// Client commands reach an engine through package client only: a gateway
// named by --gateway, else the home's engine socket, else an engine
// started in this process that serves its API in this process (see
// connect). Operator commands that read the home's files (approvals,
// policy explain, ledger) are written once against an operator source:
// a gateway's or engine socket's API, else the home's files.
package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/conchsh/conch/internal/term/visible"
)

// app carries the streams of one run of the command line and the exit
// code its command chose.
//
// stdout and stderr are the one place where the command line's output is
// made safe to show: every character a terminal would act on or not
// show is escaped (internal/term/visible), whatever printer wrote it. runs
// sets stdout's mode for the command before it starts: JSON for --json
// and the commands that print JSON (values kept exactly), raw for a
// protocol stream or --raw.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	out, errOut    *visible.Writer // stdout (whose mode runs sets) and stderr
	code           int
}

// newApp returns the app of one run on the given streams.
func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	out, errOut := &visible.Writer{W: stdout}, &visible.Writer{W: stderr}
	return &app{stdin: stdin, stdout: out, stderr: errOut, out: out, errOut: errOut}
}

// Main runs the conch command line on args (without the program name) and
// returns the process's exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := newApp(stdin, stdout, stderr)
	root := a.newRoot()
	if len(args) == 0 {
		root.SetOut(stderr)
		root.Usage()
		return ExitUsage
	}
	root.SetArgs(normalizeArgs(root, args))
	cmd, err := root.ExecuteC()
	if err != nil {
		return a.usageError(cmd, err)
	}
	return a.code
}

// NewRoot returns the command tree (for tests and documentation tools);
// its commands write to stdout and stderr.
func NewRoot() *cobra.Command {
	return newApp(os.Stdin, os.Stdout, os.Stderr).newRoot()
}

// usageError reports a bad command line in two lines, the error and where
// help is, and returns the usage exit code (exec's own, 125, for exec).
func (a *app) usageError(cmd *cobra.Command, err error) int {
	path := "conch"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command ") {
		// cobra appends its own hint; keep one.
		msg, _, _ = strings.Cut(msg, "\nRun '")
	}
	fmt.Fprintf(a.stderr, "%s: %s\nRun '%s --help' for usage.\n", path, msg, path)
	if cmd != nil && cmd.Name() == "exec" && cmd.Parent() != nil && !cmd.Parent().HasParent() {
		return ExitConchError
	}
	return ExitUsage
}

// errUsage is a usage error a command found itself (a missing subcommand,
// arguments that do not fit): Main reports it like a flag error.
type errUsage struct{ msg string }

func (e errUsage) Error() string { return e.msg }

func usagef(format string, args ...any) error { return errUsage{fmt.Sprintf(format, args...)} }

func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "conch",
		Short: "a shell-execution gateway for AI agents",
		Long: `conch is a shell-execution gateway for AI agents: it gives agents an exec tool to
run commands and a process tool to steer the ones that keep running, over MCP
(conch mcp on stdio, conch serve over HTTP), with a policy engine, approvals,
sandboxes and an audit ledger.

Environment: CONCH_HOME (default ~/.conch), CONCH_AGENT (default main),
CONCH_GATEWAY and CONCH_TOKEN (client commands).`,
		Example: `  conch serve                         # the gateway on 127.0.0.1:7878
  conch mcp                           # the tools over MCP stdio
  conch exec -- make test             # run a command, exit with its status
  conch help exec                     # help on one command
  source <(conch completion bash)     # shell completion (bash, zsh, fish)`,
		Version:           version(),
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.SetVersionTemplate(fmt.Sprintf("conch {{.Version}} (%s, %s)\n", commit(), runtime.Version()))
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	root.AddGroup(
		&cobra.Group{ID: "server", Title: "Servers:"},
		&cobra.Group{ID: "session", Title: "Session commands:"},
		&cobra.Group{ID: "operator", Title: "Operator commands:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("server", a.serveCmd(), a.mcpCmd(), a.nodeCmd())
	add("session", a.execCmd(), a.psCmd())
	add("session", a.sessionCmds()...)
	add("session", a.applyPatchCmd())
	add("operator", a.agentsCmd(), a.approvalsCmd(), a.policyCmd(), a.ledgerCmd(), a.nodesCmd(),
		a.doctorCmd(), a.sandboxCmd(), a.configCmd(), a.uiCmd())
	root.AddCommand(a.versionCmd())
	root.SetHelpCommand(helpCmd())
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	a.standaloneBashCompletion(root)
	return root
}

// runs adapts a command body that returns an exit code to cobra.
func (a *app) runs(f func(cmd *cobra.Command, args []string) int) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.out.Mode = stdoutMode(cmd)
		a.code = f(cmd, args)
		a.out.Flush()
		a.errOut.Flush()
		return nil
	}
}

// annStdout marks a command whose standard output is not text for people:
// "json" (a JSON document: hidden characters become JSON escapes, the
// values stay exact) or "raw" (a protocol stream, written as it is).
const annStdout = "conch/stdout"

// stdoutMode is how cmd's standard output is escaped: by its annotation,
// else JSON with --json or --format asciicast (JSON lines), raw with
// --raw (the program's own bytes, terminal escapes included, which the
// operator asked for), else text.
func stdoutMode(cmd *cobra.Command) visible.Mode {
	flag := func(name string) string {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	switch {
	case cmd.Annotations[annStdout] == "raw":
		return visible.ModeRaw
	case cmd.Annotations[annStdout] == "json", flag("json") == "true", flag("format") == "asciicast":
		return visible.ModeJSON
	case flag("raw") == "true":
		return visible.ModeRaw
	}
	return visible.ModeText
}

// annotate sets cmd's annotation key to value.
func annotate(cmd *cobra.Command, key, value string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[key] = value
	return cmd
}

// group makes cmd a command that only holds subcommands: alone it is a
// usage error, as is an unknown subcommand.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown subcommand %q (want one of: %s)", args[0], strings.Join(subNames(c), ", "))
		}
		return usagef("missing subcommand (want one of: %s)", strings.Join(subNames(c), ", "))
	}
	return cmd
}

func subNames(c *cobra.Command) []string {
	var n []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			n = append(n, s.Name())
		}
	}
	return n
}

// annStopsAtArg marks a command whose flags end at its first argument
// (exec, policy explain: what follows is the command to run).
const annStopsAtArg = "conch/stops-at-arg"

// stopAtFirstArg makes cmd's flags end at its first argument.
func stopAtFirstArg(cmd *cobra.Command) {
	cmd.Flags().SetInterspersed(false)
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annStopsAtArg] = "true"
}

// args returns a validator for exactly the named positional arguments
// (an optional one is written "[NAME]").
func args(names ...string) cobra.PositionalArgs {
	min := 0
	for _, n := range names {
		if !strings.HasPrefix(n, "[") {
			min++
		}
	}
	return func(cmd *cobra.Command, got []string) error {
		if len(got) < min || len(got) > len(names) {
			want := "no arguments"
			if len(names) > 0 {
				want = strings.Join(names, " ")
			}
			return usagef("want %s, got %d argument(s)", want, len(got))
		}
		return nil
	}
}

// normalizeArgs turns the spellings the Go flag package took and pflag
// does not, single-dash long flags (-home DIR, -json) and double-dash
// short ones (--C DIR), into pflag's for the command they are given to;
// other flags, values and everything after "--" (or, for a command that
// stops at its first argument, after that) stay.
func normalizeArgs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return args
	}
	out := append([]string(nil), args...)
	lookup := func(name string) *pflag.Flag {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f
		}
		return cmd.InheritedFlags().Lookup(name)
	}
	path := map[string]bool{}
	for c := cmd; c != nil; c = c.Parent() {
		path[c.Name()] = true
	}
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if path[a] {
				continue // the command's own name
			}
			if cmd.Annotations[annStopsAtArg] != "" {
				break
			}
			continue
		}
		if strings.HasPrefix(a, "--") {
			name, _, hasValue := strings.Cut(a[2:], "=")
			f := lookup(name)
			if f == nil && len(name) == 1 {
				// The Go flag package also took --C for -C.
				if f = cmd.Flags().ShorthandLookup(name); f != nil {
					out[i] = a[1:]
				}
			}
			if f != nil && !hasValue && f.Value.Type() != "bool" {
				i++ // its value
			}
			continue
		}
		name, _, hasValue := strings.Cut(a[1:], "=")
		if len(name) < 2 {
			if f := cmd.Flags().ShorthandLookup(name); f != nil && !hasValue && len(a) == 2 && f.Value.Type() != "bool" {
				i++
			}
			continue
		}
		f := lookup(name)
		if f == nil {
			continue
		}
		out[i] = "-" + a
		if !hasValue && f.Value.Type() != "bool" {
			i++
		}
	}
	return out
}

// helpCmd is `conch help [COMMAND...]`: cobra's, except that an unknown
// command is a usage error (exit 2), not the root's help.
func helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND...]",
		Short: "Help about any command",
		Long:  "Print the usage, flags and examples of a command: conch help exec, conch help approvals approve.",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil || cmd == nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() && strings.HasPrefix(s.Name(), toComplete) {
					names = append(names, s.Name()+"\t"+s.Short)
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return usagef("unknown command %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print version information",
		Long:  "Print the version as conch <version> (<commit>, <go version>).",
		Args:  args(),
		RunE: a.runs(func(cmd *cobra.Command, _ []string) int {
			fmt.Fprintf(a.stdout, "conch %s (%s, %s)\n", version(), commit(), runtime.Version())
			return ExitOK
		}),
	}
}

func defaultHome() string {
	if h := os.Getenv("CONCH_HOME"); h != "" {
		return h
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".conch"
	}
	return filepath.Join(home, ".conch")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// homeFlag adds --home.
func homeFlag(fs *pflag.FlagSet) *string {
	return fs.String("home", defaultHome(), "conch home, the state directory (env CONCH_HOME)")
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "0.1.0-dev"
}

func commit() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value[:min(12, len(s.Value))]
			}
		}
	}
	return "unknown"
}
