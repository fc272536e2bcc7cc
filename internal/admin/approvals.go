package admin

import (
	"fmt"

	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/approvals"
)

// ApprovalsChange is what a change of the approvals file did.
type ApprovalsChange struct {
	// Old is the file before the change (nil when it was unreadable);
	// New the file saved.
	Old, New *approvals.File
	// LedgerErr is why the change could not be recorded in the ledger.
	// The file was saved all the same; the caller reports it.
	LedgerErr error
}

// Hash is the new file's hash.
func (c ApprovalsChange) Hash() string { return c.New.Hash() }

// SetApprovals replaces home's approvals file with f, by the operator
// named by (a ledger actor such as "cli:alice" or "gateway"), provided the
// file on disk still has hash baseHash (else an error that is
// approvals.ErrConflict). It then appends the ledger's policy record and,
// when publish is not nil, publishes a policy.changed event.
func SetApprovals(home string, f *approvals.File, baseHash, by string, publish func(engine.Event)) (ApprovalsChange, error) {
	old, _ := approvals.Load(home)
	if err := approvals.Save(home, f, baseHash); err != nil {
		return ApprovalsChange{Old: old}, err
	}
	return recordChange(home, old, f, by, publish), nil
}

// ImportApprovals merges in (an OpenClaw exec-approvals file) into home's
// approvals file, or replaces it with in, and records the change as
// SetApprovals does. added counts the allowlist entries added by a merge.
func ImportApprovals(home string, in *approvals.File, replace bool, by string, publish func(engine.Event)) (added int, c ApprovalsChange, err error) {
	old, _ := approvals.Load(home)
	_, err = approvals.Update(home, func(f *approvals.File) error {
		if replace {
			*f = *in
			return nil
		}
		added = f.Import(in)
		return nil
	})
	if err != nil {
		return 0, ApprovalsChange{Old: old}, err
	}
	nf, err := approvals.Load(home)
	if err != nil {
		// Saved, but not readable back: the change is not recorded.
		return added, ApprovalsChange{Old: old, LedgerErr: fmt.Errorf("read back: %w", err)}, nil
	}
	return added, recordChange(home, old, nf, by, publish), nil
}

// recordChange appends the ledger record and publishes the event of a
// saved change from old to nf.
func recordChange(home string, old, nf *approvals.File, by string, publish func(engine.Event)) ApprovalsChange {
	c := ApprovalsChange{Old: old, New: nf}
	c.LedgerErr = engine.RecordPolicyChange(home, old, nf, by)
	if publish != nil {
		oldHash := ""
		if old != nil {
			oldHash = old.Hash()
		}
		publish(engine.Event{Type: "policy.changed", Data: map[string]any{"file": approvals.FileName, "oldHash": oldHash, "newHash": nf.Hash(), "by": by}})
	}
	return c
}
