package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/conchsh/conch/internal/store/approvals"
)

// The approval prompt of `conch exec` on a terminal, with an engine in
// this process: the decision is written to the home's approvals store as
// the CLI user (cli:USER), as `conch approvals approve` does on the
// home's files, and the engine picks it up.

// promptApproval asks on the terminal for a decision on an approval of an
// in-process run and records it in the home's approvals store, where the
// engine picks it up. It returns at once; the question stays open until
// answered, or until the process exits because the approval was decided
// elsewhere.
func promptApproval(home, approvalID string, in io.Reader, out io.Writer) {
	go func() {
		r := bufio.NewReader(in)
		for {
			fmt.Fprint(out, "Allow once [o], always [a], deny [d]? ")
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			var d approvals.Decision
			switch strings.ToLower(strings.TrimSpace(line)) {
			case "o", "once", "allow-once":
				d = approvals.AllowOnce
			case "a", "always", "allow-always":
				d = approvals.AllowAlways
			case "d", "deny":
				d = approvals.Deny
			default:
				continue
			}
			user := os.Getenv("USER")
			if user == "" {
				user = strconv.Itoa(os.Getuid())
			}
			store, err := approvals.OpenStore(home)
			if err == nil {
				_, err = store.Decide(approvalID, d, "cli:"+user)
			}
			if err != nil {
				fmt.Fprintf(out, "conch exec: %v\n", err)
			}
			return
		}
	}()
}
