package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/store/ledger"
	"github.com/conchsh/conch/internal/term/visible"
	"github.com/spf13/cobra"
)

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
	allowGaps := verify.Flags().Bool("allow-gaps", false, "exit 0 for an intact ledger with gap records (a HEAD rebuilt from the log still fails against --pubkey)")
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
				// A record is one line, whatever its fields hold.
				fmt.Fprintln(stdout, visible.Line(r.String()))
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
	// Say on stderr when following starts: every record appended from
	// now on is printed (scripts and tests wait for this line).
	fmt.Fprintf(stderr, "conch ledger tail: following after seq %d (Ctrl-C to stop)\n", f.Since)
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
