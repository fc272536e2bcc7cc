package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// runUI is `conch ui [--print]`: mint a one-time login link for the
// control UI of the running gateway (interfaces.md §5), through --gateway
// or the home's engine socket.
func runUI(args []string, stdout, stderr io.Writer) int {
	const synopsis = "ui [--print] [--home DIR | --gateway URL --token T]"
	fs := newFlagSet("ui", synopsis, stderr)
	g := addGlobalFlags(fs)
	printOnly := fs.Bool("print", false, "print only the link (for scripts)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "usage: conch %s\n", synopsis)
		return exitUsage
	}
	c, err := g.remoteClient()
	if err != nil {
		fmt.Fprintf(stderr, "conch ui: %v\n", err)
		return exitUsage
	}
	if c == nil {
		fmt.Fprintln(stderr, "conch ui: no gateway running (start conch serve)")
		return exitUnavailable
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lc, err := c.UILoginCode(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "conch ui: %v\n", err)
		return exitForError(err)
	}
	if *printOnly {
		fmt.Fprintln(stdout, lc.URL)
		return exitOK
	}
	fmt.Fprintf(stdout, "Open this link to sign in to the control UI (single use, valid until %s):\n\n  %s\n",
		time.UnixMilli(lc.ExpiresAtMs).Format("15:04:05"), lc.URL)
	return exitOK
}
