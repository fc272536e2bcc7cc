package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/approvals"
	"github.com/conchsh/conch/internal/ledger"
)

func (a *app) approvalsCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "approvals",
		Short: "List and decide approval requests; read and replace the approvals file",
		Long: `Approval requests wait for an operator's decision; exec-approvals.json holds the
allowlist and the per-agent policy. These commands work on the home's files, or
with --gateway on a running gateway's API (not import).`,
		Example: `  conch approvals pending
  conch approvals approve calm-gulf --always
  conch approvals deny calm-gulf
  conch approvals get > a.json && conch approvals set a.json --base-hash "$(jq -r .hash a.json)"`,
	})
	cmd.AddCommand(a.approvalsListCmd(), a.approvalsDecideCmd("approve ID [--always]", "Allow a pending request once (--always: add it to the allowlist)"),
		a.approvalsDecideCmd("deny ID", "Deny a pending request"),
		a.approvalsDecideCmd("decide ID DECISION", "Decide a pending request: allow-once, allow-always or deny (and aliases)"),
		a.approvalsGetCmd(), a.approvalsSetCmd(), a.approvalsImportCmd())
	return cmd
}

func (a *app) approvalsListCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "pending", Short: "List the approval requests waiting for a decision", Args: args()}
	o := addOpFlags(cmd.Flags())
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	cmd.RunE = a.runs(func(*cobra.Command, []string) int {
		src, err := o.source()
		if err == nil {
			var list []*approvals.Request
			if list, err = src.pendingApprovals(context.Background()); err == nil {
				if *asJSON {
					json.NewEncoder(a.stdout).Encode(list)
				} else {
					printPending(a.stdout, list)
				}
				return ExitOK
			}
		}
		fmt.Fprintf(a.stderr, "conch approvals: %v\n", err)
		return exitForOp(err, ExitUnavailable)
	})
	return cmd
}

func (a *app) approvalsDecideCmd(use, short string) *cobra.Command {
	name, _, _ := strings.Cut(use, " ")
	want := []string{"ID"}
	if name == "decide" {
		want = append(want, "DECISION")
	}
	cmd := &cobra.Command{Use: use, Short: short, Args: args(want...)}
	o := addOpFlags(cmd.Flags())
	var always *bool
	if name == "approve" {
		always = cmd.Flags().Bool("always", false, "allow always (persist the executables in the allowlist)")
	}
	cmd.RunE = a.runs(func(_ *cobra.Command, pos []string) int {
		decision := "allow-once"
		switch {
		case name == "approve" && *always:
			decision = "allow-always"
		case name == "deny":
			decision = "deny"
		case name == "decide":
			decision = pos[1]
		}
		src, err := o.source()
		if err == nil {
			var slug, decided, session string
			if slug, decided, session, err = src.decide(context.Background(), pos[0], decision); err == nil {
				fmt.Fprintf(a.stdout, "Approval %s: %s (session %s).\n", slug, decided, session)
				return ExitOK
			}
		}
		fmt.Fprintf(a.stderr, "conch approvals: %v\n", err)
		return exitForOp(err, ExitUnavailable)
	})
	return cmd
}

func (a *app) approvalsGetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get [--node N]",
		Short: "Print the approvals file with its hash (JSON)",
		Args:  args(),
	}
	o := addOpFlags(cmd.Flags())
	node := cmd.Flags().String("node", "", "the approvals file of this node host, through the gateway")
	cmd.RunE = a.runs(func(_ *cobra.Command, pos []string) int {
		if *node != "" {
			return a.nodeApprovalsFile("get", o, *node, pos, "", false)
		}
		src, err := o.source()
		if err == nil {
			var b json.RawMessage
			if b, err = src.approvalsFile(context.Background()); err == nil {
				fmt.Fprintln(a.stdout, strings.TrimRight(string(b), "\n"))
				return ExitOK
			}
		}
		fmt.Fprintf(a.stderr, "conch approvals get: %v\n", err)
		return exitForOp(err, ExitUnavailable)
	})
	return cmd
}

func (a *app) approvalsSetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "set FILE|- (--base-hash H | --force) [--node N]",
		Short: "Replace the approvals file if it is still the one with hash H",
		Args:  args("FILE"),
	}
	o := addOpFlags(cmd.Flags())
	baseHash := cmd.Flags().String("base-hash", "", "the hash of the file being replaced (from get)")
	force := cmd.Flags().Bool("force", false, "replace whatever the current file is")
	node := cmd.Flags().String("node", "", "the approvals file of this node host, through the gateway")
	cmd.RunE = a.runs(func(_ *cobra.Command, pos []string) int {
		if *node != "" {
			return a.nodeApprovalsFile("set", o, *node, pos, *baseHash, *force)
		}
		b, err := readFileOrStdin(pos[0], a.stdin)
		if err != nil {
			fmt.Fprintf(a.stderr, "conch approvals set: %v\n", err)
			return ExitFailed
		}
		src, err := o.source()
		if err == nil {
			var hash string
			if hash, err = src.setApprovalsFile(context.Background(), b, *baseHash, *force); err == nil {
				fmt.Fprintf(a.stdout, "{\"hash\":%q}\n", hash)
				return ExitOK
			}
		}
		fmt.Fprintf(a.stderr, "conch approvals set: %v\n", err)
		return exitForOp(err, ExitUnavailable)
	})
	return cmd
}

func (a *app) approvalsImportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import [PATH] [--replace]",
		Short: "Merge an OpenClaw exec-approvals.json into the home's (default ~/.openclaw/exec-approvals.json)",
		Args:  args("[PATH]"),
	}
	home := homeFlag(cmd.Flags())
	replace := cmd.Flags().Bool("replace", false, "overwrite instead of merging")
	cmd.RunE = a.runs(func(_ *cobra.Command, pos []string) int {
		return importApprovals(*home, pos, *replace, a.stdout, a.stderr)
	})
	return cmd
}

// importApprovals is `conch approvals import [PATH]` on the home's files.
func importApprovals(home string, pos []string, replace bool, stdout, stderr io.Writer) int {
	src := filepath.Join(os.Getenv("HOME"), ".openclaw", "exec-approvals.json")
	if len(pos) > 0 {
		src = pos[0]
	}
	b, err := os.ReadFile(src)
	if err != nil {
		fmt.Fprintf(stderr, "conch approvals import: %v\n", err)
		return ExitNotFound
	}
	in, err := approvals.Parse(b)
	if err != nil {
		fmt.Fprintf(stderr, "conch approvals import: %v\n", err)
		return ExitUsage
	}
	added := 0
	old, _ := approvals.Load(home)
	_, err = approvals.Update(home, func(f *approvals.File) error {
		if replace {
			*f = *in
			return nil
		}
		added = f.Import(in)
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "conch approvals import: %v\n", err)
		return ExitFailed
	}
	if nf, err := approvals.Load(home); err == nil {
		engine.RecordPolicyChange(home, old, nf, cliUser())
	}
	if replace {
		fmt.Fprintf(stdout, "Imported %s (replaced).\n", src)
	} else {
		fmt.Fprintf(stdout, "Imported %s: %d allowlist entries added.\n", src, added)
	}
	return ExitOK
}

// printPending prints pending approval requests for people.
func printPending(w io.Writer, list []*approvals.Request) {
	if len(list) == 0 {
		fmt.Fprintln(w, "No pending approvals.")
		return
	}
	for _, r := range list {
		left := time.Until(time.UnixMilli(r.ExpiresAtMs)).Round(time.Second)
		fmt.Fprintf(w, "%s  agent %s  session %s  expires in %v\n  command: %s\n  cwd: %s\n  reason: %s\n", r.Slug, r.Agent, r.SessionID, left, r.Command, r.Cwd, r.Reason)
		for _, s := range r.Segments {
			fmt.Fprintf(w, "    %-9s %s (%s)\n", s.Verdict, s.Text, s.Exe)
		}
	}
}

func (a *app) policyCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "policy",
		Short: "Show how the policy judges a command",
	})
	explain := &cobra.Command{
		Use:   "explain [--agent A] [--cwd DIR] [--json] -- CMD",
		Short: "Show whether the gate applies to an agent and how the policy judges a command",
		Example: `  conch policy explain -- 'rm -rf build'
  conch policy explain --agent build --json -- git push`,
	}
	stopAtFirstArg(explain)
	fs := explain.Flags()
	o := addOpFlags(fs)
	agent := fs.String("agent", envOr("CONCH_AGENT", "main"), "agent")
	cwd := fs.String("cwd", "", "working directory (default: current)")
	host := fs.String("host", "gateway", "host (gateway)")
	asJSON := fs.Bool("json", false, "print JSON")
	explain.RunE = a.runs(func(_ *cobra.Command, pos []string) int {
		command := strings.Join(pos, " ")
		if strings.TrimSpace(command) == "" {
			fmt.Fprintln(a.stderr, "conch policy explain: no command (put it after --)")
			return ExitUsage
		}
		if *cwd == "" {
			*cwd, _ = os.Getwd()
		}
		src, err := o.source()
		if err == nil {
			var text string
			var js any
			if text, js, err = src.explain(context.Background(), *agent, *host, *cwd, command); err == nil {
				if *asJSON {
					json.NewEncoder(a.stdout).Encode(js)
				} else {
					fmt.Fprint(a.stdout, text)
				}
				return ExitOK
			}
		}
		fmt.Fprintf(a.stderr, "conch policy explain: %v\n", err)
		return exitForOp(err, ExitUnavailable)
	})
	cmd.AddCommand(explain)
	return cmd
}

func (a *app) ledgerCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "ledger",
		Short: "Check or read the audit ledger",
		Long: `The ledger is the home's append-only, hash-chained and signed audit log of
commands, decisions and policy changes.`,
		Example: `  conch ledger verify
  conch ledger verify --pubkey ed25519:... --checkpoint 120:ab12...
  conch ledger tail -n 50 --session calm-gulf
  conch ledger tail -f --json
  conch ledger key`,
	})
	verify := &cobra.Command{
		Use:   "verify [--pubkey KEY|FILE] [--checkpoint SEQ:HASH[:MS:SIG]]... [--allow-gaps]",
		Short: "Check the ledger's chain and signatures (exit 1 if broken)",
		Args:  args(),
	}
	vo := addOpFlags(verify.Flags())
	vjson := verify.Flags().Bool("json", false, "print JSON")
	pubkey := verify.Flags().String("pubkey", "", "the public key (ed25519:... or a file holding it) that must have signed HEAD")
	checkpoints := verify.Flags().StringArray("checkpoint", nil, "a checkpoint seen earlier (SEQ:HASH[:MS:SIG]) the ledger must still hold; repeatable")
	allowGaps := verify.Flags().Bool("allow-gaps", false, "exit 0 for an intact ledger with gap records")
	verify.RunE = a.runs(func(*cobra.Command, []string) int {
		var opts ledger.VerifyOptions
		if *pubkey != "" {
			text := *pubkey
			if !strings.HasPrefix(text, "ed25519:") {
				b, err := os.ReadFile(text)
				if err != nil {
					fmt.Fprintf(a.stderr, "conch ledger verify: --pubkey: %v\n", err)
					return ExitUsage
				}
				text = string(b)
			}
			k, err := ledger.ParsePublicKey(text)
			if err != nil {
				fmt.Fprintf(a.stderr, "conch ledger verify: --pubkey: %v\n", err)
				return ExitUsage
			}
			opts.PublicKey = k
		}
		for _, c := range *checkpoints {
			ck, err := ledger.ParseCheckpoint(c)
			if err != nil {
				fmt.Fprintf(a.stderr, "conch ledger verify: --checkpoint: %v\n", err)
				return ExitUsage
			}
			opts.Checkpoints = append(opts.Checkpoints, ck)
		}
		src, err := vo.source()
		if err == nil {
			var rep ledger.Report
			if rep, err = src.ledgerVerify(context.Background(), opts); err == nil {
				return printVerify(rep, *vjson, *allowGaps, a.stdout)
			}
		}
		fmt.Fprintf(a.stderr, "conch ledger verify: %v\n", err)
		return exitForOp(err, ExitUnavailable)
	})
	tail := &cobra.Command{
		Use:   "tail [-n N] [--session ID] [--approval ID] [--agent A] [-f] [--json]",
		Short: "Print the last records (-f: and the new ones as they come)",
		Args:  args(),
	}
	to := addOpFlags(tail.Flags())
	n := tail.Flags().IntP("lines", "n", 20, "records")
	session := tail.Flags().String("session", "", "one session's records")
	approval := tail.Flags().String("approval", "", "one approval's records")
	agent := tail.Flags().String("agent", "", "one agent's records")
	follow := tail.Flags().BoolP("follow", "f", false, "keep printing new records until interrupted")
	tjson := tail.Flags().Bool("json", false, "print JSON, one record a line")
	tail.RunE = a.runs(func(*cobra.Command, []string) int {
		src, err := to.source()
		if err != nil {
			fmt.Fprintf(a.stderr, "conch ledger: %v\n", err)
			return exitForOp(err, ExitUsage)
		}
		filter := ledger.Filter{Session: *session, Approval: *approval, Agent: *agent}
		return ledgerTail(func(n int, f ledger.Filter) ([]ledger.Record, error) {
			return src.ledgerTail(context.Background(), n, f)
		}, *n, filter, *follow, *tjson, a.stdout, a.stderr)
	})
	key := &cobra.Command{
		Use:   "key",
		Short: "Print the ledger's public key (created if missing)",
		Args:  args(),
	}
	home := homeFlag(key.Flags())
	key.RunE = a.runs(func(*cobra.Command, []string) int {
		pub, err := ledger.EnsureKey(*home)
		if err != nil {
			fmt.Fprintf(a.stderr, "conch ledger key: %v\n", err)
			return ExitFailed
		}
		fmt.Fprintln(a.stdout, ledger.FormatPublicKey(pub))
		return ExitOK
	})
	cmd.AddCommand(verify, tail, key)
	return cmd
}

// readFileOrStdin reads a named file, or stdin for "-".
func readFileOrStdin(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// ledgerTail prints the last n records that match f, then, with follow,
// every new one as it is appended until SIGINT or SIGTERM. fetch returns
// the last n records matching a filter (Since: only later seqs).
func ledgerTail(fetch func(n int, f ledger.Filter) ([]ledger.Record, error), n int, f ledger.Filter, follow, asJSON bool, stdout, stderr io.Writer) int {
	print := func(recs []ledger.Record) {
		for _, r := range recs {
			if asJSON {
				b, _ := json.Marshal(r)
				fmt.Fprintln(stdout, string(b))
			} else {
				fmt.Fprintln(stdout, r.String())
			}
			f.Since = max(f.Since, r.Seq)
		}
	}
	recs, err := fetch(n, f)
	if err != nil {
		fmt.Fprintf(stderr, "conch ledger tail: %v\n", err)
		return exitForError(err)
	}
	print(recs)
	if !follow {
		return ExitOK
	}
	if f.Since == 0 {
		// Nothing matched yet: start after the current end.
		all, err := fetch(1, ledger.Filter{})
		if err == nil && len(all) > 0 {
			f.Since = all[len(all)-1].Seq
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ExitOK
		case <-t.C:
		}
		recs, err := fetch(100000, f)
		if err != nil {
			fmt.Fprintf(stderr, "conch ledger tail: %v\n", err)
			continue // a gateway restart or a moment without the file
		}
		print(recs)
	}
}

// printVerify prints a verify report and returns its exit code: 1 for a
// broken ledger, and for gap records unless allowGaps.
func printVerify(rep ledger.Report, asJSON, allowGaps bool, stdout io.Writer) int {
	if asJSON {
		json.NewEncoder(stdout).Encode(rep)
	} else {
		fmt.Fprintln(stdout, rep.String())
		for _, line := range rep.Details() {
			fmt.Fprintln(stdout, line)
		}
	}
	if !rep.OK || len(rep.Gaps) > 0 && !allowGaps {
		return ExitFailed
	}
	return ExitOK
}

// cliUser names the operator deciding from the CLI.
func cliUser() string {
	user := os.Getenv("USER")
	if user == "" {
		user = fmt.Sprint(os.Getuid())
	}
	return "cli:" + user
}
