package approvals_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/conchsh/conch/internal/store/approvals"
)

func ExampleSave() {
	home, err := os.MkdirTemp("", "conch")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)

	f, err := approvals.Load(home) // missing: empty
	if err != nil {
		log.Fatal(err) // an *UnreadableError: deny host exec
	}
	base := f.Hash()
	f.Agents["main"] = &approvals.Agent{
		Security:  "allowlist",
		Allowlist: []approvals.Entry{{Pattern: "/usr/bin/git"}},
	}
	if err := approvals.Save(home, f, base); err != nil {
		log.Fatal(err)
	}
	// A second writer still holding the old hash loses.
	err = approvals.Save(home, f, base)
	fmt.Println(errors.Is(err, approvals.ErrConflict), err)

	r := approvals.Resolve(f, "main")
	fmt.Println(r.Security.Value, r.Security.Source, r.Allowlist[0].Source, r.Allowlist[0].Pattern)
	// Output:
	// true exec approvals changed; reload and retry
	// allowlist agents.main agents.main.allowlist[0] /usr/bin/git
}

func ExampleStore_Decide() {
	home, err := os.MkdirTemp("", "conch")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)

	s, err := approvals.OpenStore(home)
	if err != nil {
		log.Fatal(err)
	}
	r, err := s.Create(approvals.Request{Agent: "main", Command: "curl -s example.com", Cwd: "/tmp"})
	if err != nil {
		log.Fatal(err)
	}
	d, err := approvals.ParseDecision("always")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Decide(r.Slug, d, "operator"); err != nil {
		log.Fatal(err)
	}
	_, err = s.Decide(r.ID, approvals.Deny, "another operator")
	fmt.Println(errors.Is(err, approvals.ErrAlreadyResolved))

	run, err := s.Consume(r.Slug) // just before the spawn
	fmt.Println(run.State, err)
	// Output:
	// true
	// consumed <nil>
}
