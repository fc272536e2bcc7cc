package admin_test

import (
	"fmt"
	"os"

	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/admin"
	"github.com/conchsh/conch/internal/store/approvals"
)

// An adapter replaces the approvals file with what the operator sent: the
// file is saved if nobody changed it meanwhile, the change goes to the
// ledger, and the adapter's event stream is told.
func ExampleSetApprovals() {
	home, _ := os.MkdirTemp("", "home")
	defer os.RemoveAll(home)
	f, _ := approvals.Parse([]byte(`{"version":1,"agents":{"main":{"allowlist":[{"pattern":"/usr/bin/git"}]}}}`))
	publish := func(e engine.Event) { fmt.Println("event:", e.Type) }
	c, err := admin.SetApprovals(home, f, "", "cli:alice", publish)
	fmt.Println(err, c.LedgerErr, c.Hash() == f.Hash())
	// Output:
	// event: policy.changed
	// <nil> <nil> true
}
