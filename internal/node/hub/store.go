// Package hub is the gateway side of node hosts: pairing
// state on disk, the hub of the links nodes dial in on (the HTTP adapter
// hands them over through internal/node/link: Admit), node selection, the
// operator operations, and the local mirrors of sessions that run on
// nodes. The engine uses it through internal/node/port's Hub; it never
// imports the engine.
package hub

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/conchsh/conch/internal/base/fsutil"
)

// Invite is a join token, stored hashed (nodes/invites.json).
type Invite struct {
	Hash        string `json:"hash"`
	CreatedAtMs int64  `json:"createdAtMs"`
	ExpiresAtMs int64  `json:"expiresAtMs"`
	Once        bool   `json:"once"`
	Used        bool   `json:"used"`
	// Pod binds the token to one sandbox pod (podpair.go).
	Pod *PodBinding `json:"pod,omitempty"`
}

// Pending is a pairing request (nodes/pending.json).
type Pending struct {
	RequestID   string   `json:"requestId"`
	NodeID      string   `json:"nodeId"`
	PublicKey   string   `json:"publicKey"`
	Name        string   `json:"name"`
	Platform    string   `json:"platform"`
	Arch        string   `json:"arch"`
	Version     string   `json:"version"`
	Caps        []string `json:"caps"`
	RemoteIP    string   `json:"remoteIp"`
	InviteHash  string   `json:"inviteHash"`
	CreatedAtMs int64    `json:"createdAtMs"`
	ExpiresAtMs int64    `json:"expiresAtMs"`
}

// Paired is a paired node (nodes/paired.json).
type Paired struct {
	NodeID    string   `json:"nodeId"`
	PublicKey string   `json:"publicKey"`
	Name      string   `json:"name"`
	TokenHash string   `json:"tokenHash"`
	Platform  string   `json:"platform"`
	Arch      string   `json:"arch"`
	Version   string   `json:"version"`
	Caps      []string `json:"caps"`
	RemoteIP  string   `json:"remoteIp"`
	PairedAt  int64    `json:"pairedAtMs"`
	LastSeen  int64    `json:"lastSeenMs"`
	// Undelivered is set when the node was approved while it was not
	// connected: its token is minted again at its next hello with the
	// invite it paired with (InviteHash).
	Undelivered bool   `json:"undelivered,omitempty"`
	InviteHash  string `json:"inviteHash,omitempty"`
	// Pod is the sandbox pod this node runs in (podpair.go).
	Pod *PodBinding `json:"pod,omitempty"`
}

// Route records which node runs a mirrored session (nodes/sessions.json),
// so that a restarted gateway still routes it.
type Route struct {
	NodeID string `json:"nodeId"`
	Agent  string `json:"agent"`
	// Offset is the node's cursor minus the mirror's: it grows when the
	// node's journal dropped a range the mirror never saw.
	Offset int64 `json:"offset,omitempty"`
	// KillBy is a kill asked for while the node was unreachable, to
	// deliver when it is back (also after a gateway restart).
	KillBy string `json:"killBy,omitempty"`
	// Removed is set when the session was removed on the gateway before
	// the node reported its end: a restarted gateway does not mirror it
	// again; it only delivers the kill at the node's next connection,
	// then forgets the route.
	Removed bool `json:"removed,omitempty"`
}

// State is the whole pairing state.
type State struct {
	Invites []Invite
	Pending []Pending
	Paired  []Paired
	Routes  map[string]Route
}

// Store is the pairing state in $CONCH_HOME/nodes, shared by the gateway
// and offline CLI commands through a lock file.
type Store struct{ dir string }

// OpenStore returns the store of home (the directory is created 0700).
func OpenStore(home string) (*Store, error) {
	dir := filepath.Join(home, "nodes")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &Store{dir: dir}, nil
}

func (s *Store) path(name string) string { return filepath.Join(s.dir, name) }

// Update runs f on the current state under the lock and saves it when f
// returns nil.
func (s *Store) Update(f func(*State) error) error {
	lf, err := fsutil.LockFile(s.path("lock"))
	if err != nil {
		return err
	}
	defer lf.Close()
	st, err := s.load()
	if err != nil {
		return err
	}
	before := map[string][]byte{}
	for name, v := range st.files() {
		before[name], _ = json.Marshal(v)
	}
	now := time.Now().UnixMilli()
	// Expired pairing requests and invites are dropped.
	st.Pending = filter(st.Pending, func(p Pending) bool { return p.ExpiresAtMs > now })
	st.Invites = filter(st.Invites, func(i Invite) bool { return i.ExpiresAtMs > now-24*3600*1000 })
	if err := f(st); err != nil {
		return err
	}
	// Only the files that changed are rewritten.
	for name, v := range st.files() {
		if b, _ := json.Marshal(v); bytes.Equal(b, before[name]) {
			continue
		}
		if err := fsutil.WriteJSON(s.path(name), v); err != nil {
			return err
		}
	}
	return nil
}

func (st *State) files() map[string]any {
	return map[string]any{"invites.json": st.Invites, "pending.json": st.Pending, "paired.json": st.Paired, "sessions.json": st.Routes}
}

// Read returns the current state.
func (s *Store) Read() (*State, error) {
	var out *State
	err := s.Update(func(st *State) error { out = st; return errStop })
	if errors.Is(err, errStop) {
		err = nil
	}
	return out, err
}

var errStop = errors.New("read only")

func (s *Store) load() (*State, error) {
	st := &State{Routes: map[string]Route{}}
	for name, v := range map[string]any{"invites.json": &st.Invites, "pending.json": &st.Pending, "paired.json": &st.Paired, "sessions.json": &st.Routes} {
		// ReadJSON checks the checksum WriteJSON adds (and strips it).
		err := fsutil.ReadJSON(s.path(name), v)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("nodes/%s: %w", name, err)
		}
	}
	if st.Routes == nil {
		st.Routes = map[string]Route{}
	}
	return st, nil
}

func filter[T any](xs []T, keep func(T) bool) []T {
	out := xs[:0:0]
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// NewToken returns a random token with prefix (cnj_, cnt_).
func NewToken(prefix string) string {
	b := make([]byte, 24)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// TokenHash is how tokens are stored.
func TokenHash(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// CreateInvite stores a new join token valid for ttl and returns it.
func (s *Store) CreateInvite(ttl time.Duration, once bool) (string, int64, error) {
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	tok := NewToken("cnj_")
	now := time.Now()
	exp := now.Add(ttl).UnixMilli()
	err := s.Update(func(st *State) error {
		st.Invites = append(st.Invites, Invite{Hash: TokenHash(tok), CreatedAtMs: now.UnixMilli(), ExpiresAtMs: exp, Once: once})
		return nil
	})
	return tok, exp, err
}

// Node is a node as listed to operators (GET /v1/nodes).
type Node struct {
	NodeID      string   `json:"nodeId"`
	Name        string   `json:"name"`
	Status      string   `json:"status"` // connected | offline | pending
	Connected   bool     `json:"connected"`
	Platform    string   `json:"platform"`
	Arch        string   `json:"arch"`
	Version     string   `json:"version"`
	Caps        []string `json:"caps"`
	RemoteIP    string   `json:"remoteIp"`
	PairedAtMs  int64    `json:"pairedAtMs,omitempty"`
	LastSeenMs  int64    `json:"lastSeenAtMs,omitempty"`
	RequestID   string   `json:"requestId,omitempty"`
	RequestedMs int64    `json:"requestedAtMs,omitempty"`
	ExpiresAtMs int64    `json:"expiresAtMs,omitempty"`
}

// Errors of operator actions.
var (
	ErrNotFound  = errors.New("no such node or pairing request")
	ErrAmbiguous = errors.New("ambiguous node")
	ErrNameTaken = errors.New("node name already in use")
)

// Approve pairs the pending request q names (request id, node id, name,
// IP or id prefix of at least apitype.MinNodePrefix characters) and
// returns the paired record and its new node token.
func (s *Store) Approve(q string) (Paired, string, error) {
	var out Paired
	tok := NewToken("cnt_")
	err := s.Update(func(st *State) error {
		c, err := st.resolve(q, false, true)
		if err != nil {
			return err
		}
		idx := slices.IndexFunc(st.Pending, func(p Pending) bool { return p.NodeID == c.id })
		p := st.Pending[idx]
		st.Pending = append(st.Pending[:idx:idx], st.Pending[idx+1:]...)
		name := st.assignName(p.Name, p.NodeID, true) // never a name another request holds
		out = Paired{NodeID: p.NodeID, PublicKey: p.PublicKey, Name: name, TokenHash: TokenHash(tok),
			Platform: p.Platform, Arch: p.Arch, Version: p.Version, Caps: p.Caps, RemoteIP: p.RemoteIP,
			PairedAt: time.Now().UnixMilli(), InviteHash: p.InviteHash, Undelivered: true}
		st.Paired = filter(st.Paired, func(x Paired) bool { return x.NodeID != p.NodeID })
		st.Paired = append(st.Paired, out)
		return nil
	})
	return out, tok, err
}

// updateStore is Store.Update for a change the caller goes on without
// when it cannot be written (the node store's files on a full or
// read-only disk): the failure is logged, never dropped. errStop (no
// change) is not a failure.
func (h *Hub) updateStore(f func(*State) error) {
	if err := h.store.Update(f); err != nil && !errors.Is(err, errStop) {
		h.log.Warn("node store not written", "err", err)
	}
}
