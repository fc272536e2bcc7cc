package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/patch"
	"github.com/spf13/cobra"
)

func (a *app) applyPatchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apply-patch [--workdir DIR] < PATCH",
		Short: `Apply a "*** Begin Patch" patch read from stdin (the apply_patch tool)`,
		Long: `Read a patch in the "*** Begin Patch" format from stdin and apply it with the
apply_patch tool: the result goes to stdout when it applied, to stderr when it
failed.`,
		Example: "  conch apply-patch -C ~/src/app < change.patch",
		Args:    args(),
	}
	fs := cmd.Flags()
	g := addGlobalFlags(fs)
	var workdir string
	fs.StringVarP(&workdir, "workdir", "C", "", "the workspace when the engine runs on this machine and the agent has none configured (default: the current directory)")
	cmd.RunE = a.runs(func(cmd *cobra.Command, _ []string) int {
		return a.applyPatch(g, workdir)
	})
	return cmd
}

func (a *app) applyPatch(g *globalFlags, workdir string) int {
	stdin, stdout, stderr := a.stdin, a.stdout, a.stderr
	if workdir != "" {
		if g.gateway != "" {
			fmt.Fprintln(stderr, "conch apply-patch: --workdir needs an engine on this machine (not --gateway)")
			return ExitUsage
		}
		abs, err := filepath.Abs(workdir)
		if err != nil {
			fmt.Fprintf(stderr, "conch apply-patch: %v\n", err)
			return ExitUsage
		}
		g.workdir = abs
	}
	b, err := io.ReadAll(io.LimitReader(stdin, patch.MaxPatchBytes+1))
	if err != nil {
		fmt.Fprintf(stderr, "conch apply-patch: read stdin: %v\n", err)
		return ExitFailed
	}
	if len(b) > patch.MaxPatchBytes {
		fmt.Fprintf(stderr, "Patch too large: more than %d bytes (limit %d bytes).\n", patch.MaxPatchBytes, patch.MaxPatchBytes)
		return ExitFailed
	}
	be, err := g.connect()
	if err != nil {
		fmt.Fprintf(stderr, "conch apply-patch: %v\n", err)
		return exitForError(err)
	}
	defer be.close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := be.ApplyPatch(ctx, string(b))
	var ae *client.Error
	if err != nil && !errors.As(err, &ae) {
		fmt.Fprintf(stderr, "conch apply-patch: %v\n", err)
		return ExitUnavailable
	}
	if g.json {
		printJSON(stdout, res)
	} else {
		events, text := splitEvents(res.Text)
		for _, e := range events {
			fmt.Fprintln(stderr, e)
		}
		if err != nil {
			printText(stderr, text)
		} else {
			printText(stdout, text)
		}
	}
	if err != nil {
		return exitForError(err)
	}
	return ExitOK
}
