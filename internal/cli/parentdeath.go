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

// errParentGone: the parent ended before exitWithParent could watch it.
var errParentGone = errors.New("the process that started conch has already ended (--exit-with-parent)")
