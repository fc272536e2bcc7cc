package registry

import (
	"sort"
	"sync"
)

// Table is the session table of an engine: values of type S (a pointer
// to the engine's session record) by session id. It is safe for
// concurrent use; the zero value is not, use NewTable.
//
// Its lock is a leaf taken briefly: the predicates given to Select and
// RemoveWhere run under it and may take the values' own locks, but must
// not call the Table.
type Table[S comparable] struct {
	mu sync.Mutex // guards m
	m  map[string]S
}

// NewTable returns an empty table.
func NewTable[S comparable]() *Table[S] { return &Table[S]{m: map[string]S{}} }

// Get returns the value of id, or the zero S and false.
func (t *Table[S]) Get(id string) (S, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[id]
	return s, ok
}

// Has reports whether id is in the table.
func (t *Table[S]) Has(id string) bool {
	_, ok := t.Get(id)
	return ok
}

// Put sets id's value.
func (t *Table[S]) Put(id string, s S) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[id] = s
}

// Remove deletes id when its value is still s (a newer value under the
// same id is kept) and reports whether it did.
func (t *Table[S]) Remove(id string, s S) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.m[id]; ok && cur == s {
		delete(t.m, id)
		return true
	}
	return false
}

// Select returns the values for which keep returns true (all with nil
// keep), in no particular order.
func (t *Table[S]) Select(keep func(S) bool) []S {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]S, 0, len(t.m))
	for _, s := range t.m {
		if keep == nil || keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// Count returns the number of values for which keep returns true.
func (t *Table[S]) Count(keep func(S) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.m {
		if keep(s) {
			n++
		}
	}
	return n
}

// RemoveWhere deletes the values for which drop returns true, in one
// step, and returns them.
func (t *Table[S]) RemoveWhere(drop func(S) bool) []S {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []S
	for id, s := range t.m {
		if drop(s) {
			delete(t.m, id)
			out = append(out, s)
		}
	}
	return out
}

// IDs returns every id, sorted (nil for an empty table).
func (t *Table[S]) IDs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id := range t.m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
