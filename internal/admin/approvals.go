package admin

import (
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/store/approvals"
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
	var c ApprovalsChange
	err := approvals.SaveRecorded(home, f, baseHash, func(old, nf *approvals.File) { c = record(home, old, nf, by) })
	if err != nil {
		old, _ := approvals.Load(home)
		return ApprovalsChange{Old: old}, err
	}
	c.publish(by, publish)
	return c, nil
}

// ImportApprovals merges in (an OpenClaw exec-approvals file) into home's
// approvals file, or replaces it with in, and records the change as
// SetApprovals does. added counts the allowlist entries added by a merge.
// An import that leaves the file as it was records nothing.
func ImportApprovals(home string, in *approvals.File, replace bool, by string, publish func(engine.Event)) (added int, c ApprovalsChange, err error) {
	ch, err := approvals.UpdateRecorded(home, func(f *approvals.File) error {
		if replace {
			*f = *in
			return nil
		}
		added = f.Import(in)
		return nil
	}, func(old, nf *approvals.File) { c = record(home, old, nf, by) })
	if err != nil {
		old, _ := approvals.Load(home)
		return 0, ApprovalsChange{Old: old}, err
	}
	if !ch.Written {
		cur, _ := approvals.Load(home)
		return added, ApprovalsChange{Old: cur, New: cur}, nil
	}
	c.publish(by, publish)
	return added, c, nil
}

// record appends the ledger record of a change from old to nf. It runs
// under the approvals file's lock, so that the ledger's policy records are
// in the order of the file's versions and each names its predecessor.
func record(home string, old, nf *approvals.File, by string) ApprovalsChange {
	return ApprovalsChange{Old: old, New: nf, LedgerErr: engine.RecordPolicyChange(home, old, nf, by)}
}

// publish publishes the policy.changed event of a recorded change.
func (c ApprovalsChange) publish(by string, publish func(engine.Event)) {
	if publish == nil {
		return
	}
	oldHash := ""
	if c.Old != nil {
		oldHash = c.Old.Hash()
	}
	publish(engine.Event{Type: "policy.changed", Data: map[string]any{"file": approvals.FileName, "oldHash": oldHash, "newHash": c.New.Hash(), "by": by}})
}
