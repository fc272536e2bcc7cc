package state

import (
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestCLIExecReportsLostOutput: `conch exec` (plain text, as an operator
// or a script runs it) whose output the journal cap dropped says on
// stderr how many bytes are gone for good, for a run that finishes inside
// its yield window and for one that is followed to its end. It used to
// print the cut-short output and exit 0 with no word (only --json and
// process poll said so). The same report covers output a full home could
// not record (unrecordedBytes: reportLoss in internal/cli/exec.go; checked
// by hand on a 2 MiB tmpfs, not here: a disk kept full holds the run back
// until space is freed).
func TestCLIExecReportsLostOutput(t *testing.T) {
	for _, yield := range []string{"completed", "followed"} {
		t.Run(yield, func(t *testing.T) {
			home := e2etest.NewHome(t, `{"tools":{"exec":{"journalMaxBytes":1048576}}}`)
			args := []string{"exec", "--home", home}
			if yield == "followed" {
				args = append(args, "--yield", "0")
			}
			out, errOut, code := e2etest.RunCLI(t, nil, append(args, "--", "head -c 6000000 /dev/zero | tr '\\0' a; echo; echo END")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if len(out) >= 6000000 {
				t.Fatalf("nothing was lost (%d bytes printed)", len(out))
			}
			if !strings.Contains(errOut, "dropped by the journal cap") || !strings.Contains(errOut, "gone for good") {
				t.Fatalf("%d of 6000000 bytes printed and stderr does not say what is gone: %q", len(out), errOut)
			}
		})
	}
}
