package httpapi

import (
	"sync"

	"github.com/conchsh/conch/internal/store/approvals"
)

// openApprovals opens a home's approvals store; tests count its calls.
var openApprovals = approvals.OpenStore

// approvalsStore is the server's approvals store, opened on first use and
// then held: a request never opens it again. A failed open is not kept,
// so a later request tries again (and answers the error meanwhile).
type approvalsStore struct {
	mu sync.Mutex // guards st
	st *approvals.Store
}

func (a *approvalsStore) get(home string) (*approvals.Store, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st == nil {
		st, err := openApprovals(home)
		if err != nil {
			return nil, err
		}
		a.st = st
	}
	return a.st, nil
}
