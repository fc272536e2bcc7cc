package cli

import (
	"errors"
	"os"

	"github.com/spf13/pflag"
)

// startPPID is the parent process id as early as this process can read
// it: before main, so that a parent that dies while conch starts is still
// noticed (exitWithParent compares against it).
var startPPID = os.Getppid()

// exitWithParentFlag adds --exit-with-parent to fs: on by default when
// the go command started conch.
func exitWithParentFlag(fs *pflag.FlagSet) *bool {
	return fs.Bool("exit-with-parent", parentIsGoTool(), "stop, as on SIGTERM, when the process that started conch ends (default: true when started by `go run`)")
}

// exitWithParent(stop) makes this process stop as on SIGTERM when its
// parent ends: on Unix the parent's end is a SIGTERM (which the caller's
// signal context catches), on Windows, where no signal can be raised, it
// calls stop, the cancel of that context (parentdeath_*.go).

// errParentGone: the parent ended before exitWithParent could watch it.
var errParentGone = errors.New("the process that started conch has already ended (--exit-with-parent)")
