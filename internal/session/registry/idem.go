package registry

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/base/fsutil"
)

// IdemEntry is one idempotency key of one agent. The exported fields are
// what the store file keeps; they are set by Begin and Finish and must be
// treated as read-only by callers.
type IdemEntry struct {
	Agent       string          `json:"agent"`
	Key         string          `json:"key"`
	Fingerprint string          `json:"fingerprint"`
	SessionID   string          `json:"sessionId,omitempty"`
	CreatedAt   int64           `json:"createdAt"`
	Text        string          `json:"text"`
	Details     json.RawMessage `json:"details"`

	done chan struct{} // closed when the first call returned; nil once loaded
	res  apitype.Result
}

// InFlight reports whether the first call with this key has not returned.
func (en *IdemEntry) InFlight() bool {
	if en.done == nil {
		return false
	}
	select {
	case <-en.done:
		return false
	default:
		return true
	}
}

// Wait blocks until the first call with this key has returned, or ctx is
// done (then it returns ctx's error).
func (en *IdemEntry) Wait(ctx context.Context) error {
	if en.done == nil {
		return nil
	}
	select {
	case <-en.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Result is the first call's result: the one Finish recorded, or for an
// entry loaded from the file its text and raw details. Valid once Wait
// returned nil.
func (en *IdemEntry) Result() apitype.Result { return en.res }

// IdemOutcome says what Begin found.
type IdemOutcome int

const (
	// IdemFirst: no live entry had the key; the caller runs the request
	// and must call Finish.
	IdemFirst IdemOutcome = iota
	// IdemReplay: the key was used with the same fingerprint; the caller
	// waits for the entry and answers from it.
	IdemReplay
	// IdemConflict: the key was used for a different request.
	IdemConflict
)

// IdemStore holds the idempotency keys of a home and keeps the finished
// ones in a file (checksummed JSON, fsutil.WriteJSON).
//
// Locking: mu guards the table and is never held during file I/O. File
// writes are serialised by wmu (lock order wmu, then mu, briefly, to take a
// snapshot). Durability and ordering: when Finish returns, the file holds
// a snapshot of the table taken after Finish's change (or a later one), as
// the answer of the call it records may go out only then; snapshots are
// written in the order they were taken, so a slow older write never
// replaces a newer one.
type IdemStore struct {
	path string
	// write stores the file; fsutil.WriteJSON (tests replace it).
	write func(path string, v any) error

	mu      sync.Mutex // guards entries and gen
	entries map[string]*IdemEntry
	gen     uint64 // counts changes that must reach the file

	wmu     sync.Mutex // serialises writes; guards written
	written uint64     // the generation the file holds
}

func idemMapKey(agent, key string) string { return agent + "\x00" + key }

// OpenIdem loads the store kept at path. A missing file is an empty
// store. A damaged file (errors.Is(err, fsutil.ErrDamaged)) also gives
// an empty, usable store together with the error, for the caller to
// report; the next write replaces the file.
func OpenIdem(path string) (*IdemStore, error) {
	s := &IdemStore{path: path, write: fsutil.WriteJSON, entries: map[string]*IdemEntry{}}
	// The entries are an object's "entries"; an earlier conch wrote the
	// bare list.
	var raw json.RawMessage
	err := fsutil.ReadJSON(path, &raw)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		return s, err
	}
	var list []*IdemEntry
	if len(raw) > 0 && raw[0] == '[' {
		json.Unmarshal(raw, &list)
	} else {
		var f struct {
			Entries []*IdemEntry `json:"entries"`
		}
		json.Unmarshal(raw, &f)
		list = f.Entries
	}
	for _, en := range list {
		if en == nil {
			continue
		}
		en.res = apitype.Result{Text: en.Text, Details: en.Details}
		s.entries[idemMapKey(en.Agent, en.Key)] = en
	}
	return s, nil
}

// Begin looks up (agent, key). An entry for which expired returns true is
// dropped first (expired runs under the store's lock: it must not call the
// store). With no live entry a new in-flight one is made and Begin returns
// it with IdemFirst; otherwise it returns the entry with IdemReplay, or
// IdemConflict when fingerprint differs from the entry's.
func (s *IdemStore) Begin(agent, key, fingerprint string, createdAt int64, expired func(*IdemEntry) bool) (*IdemEntry, IdemOutcome) {
	k := idemMapKey(agent, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	en := s.entries[k]
	if en != nil && expired != nil && expired(en) {
		delete(s.entries, k)
		en = nil
	}
	if en != nil {
		if en.Fingerprint != fingerprint {
			return en, IdemConflict
		}
		return en, IdemReplay
	}
	en = &IdemEntry{Agent: agent, Key: key, Fingerprint: fingerprint, CreatedAt: createdAt, done: make(chan struct{})}
	s.entries[k] = en
	return en, IdemFirst
}

// Finish records the first call's result in en (from Begin with
// IdemFirst), wakes the retries waiting for it, and writes the file
// before it returns (see IdemStore for the guarantee). keep false drops
// the key: a call that did not run leaves nothing to de-duplicate. The
// write's error is returned; the table is updated regardless.
func (s *IdemStore) Finish(en *IdemEntry, sessionID string, res apitype.Result, keep bool) error {
	b, _ := json.Marshal(res.Details)
	s.mu.Lock()
	en.SessionID, en.Text, en.Details, en.res = sessionID, res.Text, b, res
	close(en.done)
	if !keep {
		k := idemMapKey(en.Agent, en.Key)
		if s.entries[k] == en {
			delete(s.entries, k)
		}
	}
	s.gen++
	s.mu.Unlock()
	return s.persist()
}

// persist writes the newest snapshot unless the file already holds it.
func (s *IdemStore) persist() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	gen := s.gen
	if gen == s.written {
		s.mu.Unlock()
		return nil // a later caller's write already covered this change
	}
	list := make([]*IdemEntry, 0, len(s.entries))
	for _, en := range s.entries {
		if !en.InFlight() {
			c := *en // Finish never changes an entry that is done
			list = append(list, &c)
		}
	}
	s.mu.Unlock()
	os.MkdirAll(filepath.Dir(s.path), 0o700)
	err := s.write(s.path, struct {
		Entries []*IdemEntry `json:"entries"`
	}{list})
	if err == nil {
		s.written = gen
	}
	return err
}

// Sweep drops the entries that are not in flight and for which expired
// returns true (it runs under the store's lock). The file is not written:
// the next Finish writes the table without them.
func (s *IdemStore) Sweep(expired func(*IdemEntry) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, en := range s.entries {
		if !en.InFlight() && expired(en) {
			delete(s.entries, k)
		}
	}
}

// Len returns the number of keys held (in flight or finished).
func (s *IdemStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
