package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/conchsh/conch/internal/admin"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/internal/term/visible"
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
	return annotate(cmd, annStdout, "json")
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
	added, c, err := admin.ImportApprovals(home, in, replace, cliUser(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "conch approvals import: %v\n", err)
		return ExitFailed
	}
	if c.LedgerErr != nil {
		fmt.Fprintf(stderr, "conch approvals import: ledger: %v\n", c.LedgerErr)
	}
	if replace {
		fmt.Fprintf(stdout, "Imported %s (replaced).\n", src)
	} else {
		fmt.Fprintf(stdout, "Imported %s: %d allowlist entries added.\n", src, added)
	}
	return ExitOK
}

// printPending prints pending approval requests for people. Every field
// an agent or a node chose is shown on its own line with its hidden
// characters escaped (visible.Line): a newline, a carriage return or an
// escape sequence in a command cannot paint a request that is not there.
func printPending(w io.Writer, list []*approvals.Request) {
	if len(list) == 0 {
		fmt.Fprintln(w, "No pending approvals.")
		return
	}
	l := visible.Line
	for _, r := range list {
		left := time.Until(time.UnixMilli(r.ExpiresAtMs)).Round(time.Second)
		fmt.Fprintf(w, "%s  agent %s  session %s  expires in %v\n", l(r.Slug), l(r.Agent), l(r.SessionID), left)
		if r.NodeID != "" {
			fmt.Fprintf(w, "  node: %s\n", l(r.NodeID))
		}
		fmt.Fprintf(w, "  command: %s\n  cwd: %s\n", l(r.Command), l(r.Cwd))
		if len(r.EnvKeys) > 0 {
			fmt.Fprintf(w, "  env: %s\n", l(strings.Join(r.EnvKeys, " ")))
		}
		fmt.Fprintf(w, "  reason: %s\n", l(r.Reason))
		for _, s := range r.Segments {
			fmt.Fprintf(w, "    %-9s %s (%s)\n", l(s.Verdict), l(s.Text), l(s.Exe))
		}
	}
}

// readFileOrStdin reads a named file, or stdin for "-".
func readFileOrStdin(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// cliUser names the operator deciding from the CLI.
func cliUser() string {
	user := os.Getenv("USER")
	if user == "" {
		user = fmt.Sprint(os.Getuid())
	}
	return "cli:" + user
}
