package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/patch"
)

// runApplyPatch is `conch apply-patch [--workdir DIR]` (interfaces.md §4):
// it reads a patch from stdin, runs the apply_patch tool and prints the
// result text: on stdout when it applied, on stderr when it failed.
func runApplyPatch(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("apply-patch", "apply-patch [--workdir DIR] < PATCH", stderr)
	g := addGlobalFlags(fs)
	var workdir string
	fs.StringVar(&workdir, "C", "", "short for --workdir")
	fs.StringVar(&workdir, "workdir", "", "the workspace when the engine runs on this machine and the agent has none configured (default: the current directory)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "conch apply-patch: the patch is read from stdin; no arguments")
		return exitUsage
	}
	if workdir != "" {
		if g.gateway != "" {
			fmt.Fprintln(stderr, "conch apply-patch: --workdir needs an engine on this machine (not --gateway)")
			return exitUsage
		}
		abs, err := filepath.Abs(workdir)
		if err != nil {
			fmt.Fprintf(stderr, "conch apply-patch: %v\n", err)
			return exitUsage
		}
		g.workdir = abs
	}
	b, err := io.ReadAll(io.LimitReader(stdin, patch.MaxPatchBytes+1))
	if err != nil {
		fmt.Fprintf(stderr, "conch apply-patch: read stdin: %v\n", err)
		return exitFailed
	}
	if len(b) > patch.MaxPatchBytes {
		fmt.Fprintf(stderr, "Patch too large: more than %d bytes (limit %d bytes).\n", patch.MaxPatchBytes, patch.MaxPatchBytes)
		return exitFailed
	}
	be, err := g.connect()
	if err != nil {
		fmt.Fprintf(stderr, "conch apply-patch: %v\n", err)
		return exitForError(err)
	}
	defer be.close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := be.applyPatch(ctx, string(b))
	var ae *client.Error
	if err != nil && !errors.As(err, &ae) {
		fmt.Fprintf(stderr, "conch apply-patch: %v\n", err)
		return exitUnavailable
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
	return exitOK
}

func (r *remoteBackend) applyPatch(ctx context.Context, input string) (client.Result, error) {
	return r.c.ApplyPatch(ctx, input)
}

func (l *localBackend) applyPatch(ctx context.Context, input string) (client.Result, error) {
	return l.call(ctx, "apply_patch", map[string]any{"input": input})
}
