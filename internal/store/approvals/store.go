package approvals

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/base/fsutil"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// State is the state of a pending-approval record.
type State string

const (
	Pending  State = "pending"  // waiting for a decision
	Allowed  State = "allowed"  // allow-once or allow-always; may run once
	Denied   State = "denied"   // decided deny
	Expired  State = "expired"  // the timeout passed without a decision
	Consumed State = "consumed" // allowed and its one run started
	// Dropped: the process that held the request's prepared run (the
	// engine that made it) ended before the run started, so no decision
	// can make it run; DropReason says why.
	Dropped State = "dropped"
)

// Decision is an operator's answer to an approval request.
type Decision string

const (
	AllowOnce   Decision = "allow-once"
	AllowAlways Decision = "allow-always"
	Deny        Decision = "deny"
)

// decisionAliases are the words accepted for each decision.
var decisionAliases = map[string]Decision{
	"allow":        AllowOnce,
	"once":         AllowOnce,
	"allow-once":   AllowOnce,
	"always":       AllowAlways,
	"allow-always": AllowAlways,
	"deny":         Deny,
	"reject":       Deny,
	"block":        Deny,
}

// ParseDecision maps a decision or one of its aliases, as accepted by `conch approvals
// decide` and the API's decision field, to a Decision: allow|once|allow-once ⇒ allow-once,
// always|allow-always ⇒ allow-always, deny|reject|block ⇒ deny. Case and surrounding space
// are ignored.
func ParseDecision(s string) (Decision, error) {
	d, ok := decisionAliases[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return "", fmt.Errorf("invalid decision %q (want allow-once, allow-always or deny)", s)
	}
	return d, nil
}

// DefaultTimeout is the approval timeout (approvals.timeoutMs) [Store.Create] uses when the
// request has no expiry.
const DefaultTimeout = 120 * time.Second

var (
	// ErrUnknown is returned for an id or slug that names no record.
	ErrUnknown = errors.New("unknown approval id")
	// ErrAlreadyResolved is wrapped by *[AlreadyResolvedError].
	ErrAlreadyResolved = errors.New("approval already resolved")
	// ErrNotAllowed is returned by [Store.Consume] for a record that is not in state allowed.
	ErrNotAllowed = errors.New("approval does not allow a run")
	// ErrDropped is wrapped by *[DroppedError].
	ErrDropped = errors.New("approval dropped")
)

// DroppedError is returned by [Store.Decide] for a request whose run can no longer
// happen: the process that held its prepared run is gone (the record is then moved to
// [Dropped]), or it was dropped before. Nothing ran. It matches [ErrDropped].
type DroppedError struct {
	Slug   string
	Reason string
}

func (e *DroppedError) Error() string {
	return "approval " + e.Slug + " dropped: " + e.Reason + "; nothing ran (run the command again to ask anew)"
}

func (e *DroppedError) Is(target error) bool { return target == ErrDropped }

// Holder names the process that holds a request's prepared run (its plan with the
// environment values, which are never stored): the run can only happen in it.
type Holder struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // its start time in clock ticks since boot (/proc/<pid>/stat)
}

// HolderSelf returns the Holder of the calling process.
func HolderSelf() *Holder {
	pid := os.Getpid()
	return &Holder{PID: pid, Start: procStart(pid)}
}

// alive reports whether h is still running (a nil h, or one that cannot be checked on
// this system, is).
func (h *Holder) alive() bool {
	if h == nil || h.PID <= 0 {
		return true
	}
	st, ok := procStartOK(h.PID)
	if !ok {
		return !procCheckable()
	}
	return h.Start == 0 || st == h.Start
}

// dropReason is the DropReason of a request whose holder is gone.
func dropReason(h *Holder) string {
	return fmt.Sprintf("the gateway that held its prepared run (pid %d) stopped while it was pending", h.PID)
}

// AlreadyResolvedError is returned by [Store.Decide] when the record has left the pending
// state (or its expiry has passed): the first decision wins. It matches
// [ErrAlreadyResolved] with errors.Is; its text is "approval <slug> already resolved
// (<decision>)".
type AlreadyResolvedError struct {
	Slug       string
	Resolution string // the winning decision, or "expired"
}

func (e *AlreadyResolvedError) Error() string {
	return "approval " + e.Slug + " already resolved (" + e.Resolution + ")"
}

func (e *AlreadyResolvedError) Is(target error) bool { return target == ErrAlreadyResolved }

// Request is a persisted approval request: the file approvals/<id>.json.
// Env values are never stored, only keys and a hash.
type Request struct {
	ID          string          `json:"id"`   // UUID v4; set by Create
	Slug        string          `json:"slug"` // the first 8 hex characters of ID; set by Create
	Agent       string          `json:"agent"`
	SessionID   string          `json:"sessionId"` // the reserved session
	RequestID   string          `json:"requestId"` // links the ledger's evaluate, request, decision, exec
	Host        string          `json:"host"`      // "gateway" or "node"
	NodeID      string          `json:"nodeId,omitempty"`
	Command     string          `json:"command"`
	Argv        []string        `json:"argv,omitempty"`
	Cwd         string          `json:"cwd"`
	CwdIdentity *FileID         `json:"cwdIdentity,omitempty"`
	EnvKeys     []string        `json:"envKeys"`
	EnvHash     string          `json:"envHash,omitempty"`
	Segments    []Segment       `json:"segments"`
	Script      *FileDigest     `json:"script,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Plan        json.RawMessage `json:"plan,omitempty"` // the node run plan
	Security    string          `json:"security,omitempty"`
	Ask         string          `json:"ask,omitempty"`
	AskFallback string          `json:"askFallback,omitempty"`
	Persist     []string        `json:"persist,omitempty"` // what allow-always would persist
	Holder      *Holder         `json:"holder,omitempty"`  // the process that can run it
	DropReason  string          `json:"dropReason,omitempty"`

	CreatedAtMs  int64    `json:"createdAtMs"`            // Unix ms; set by Create if zero
	ExpiresAtMs  int64    `json:"expiresAtMs"`            // Unix ms; Create uses DefaultTimeout if zero
	State        State    `json:"state"`                  // set by the Store
	Decision     Decision `json:"decision,omitempty"`     // set by Decide
	DecidedBy    string   `json:"decidedBy,omitempty"`    // set by Decide
	DecidedAtMs  int64    `json:"decidedAtMs,omitempty"`  // when the record left pending (Decide or Expire)
	ConsumedAtMs int64    `json:"consumedAtMs,omitempty"` // set by Consume
}

// FileID identifies a file or directory independently of its path.
type FileID struct {
	Device uint64 `json:"device"`
	Inode  uint64 `json:"inode"`
}

// FileDigest is a path and the sha256 of its content.
type FileDigest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Segment is one analysed command segment of a request.
type Segment struct {
	Text     string `json:"text"`
	Exe      string `json:"exe,omitempty"`      // the resolved executable path
	RealPath string `json:"realPath,omitempty"` // after symlinks
	SHA256   string `json:"sha256,omitempty"`   // of the executable
	Verdict  string `json:"verdict"`
	Rule     string `json:"rule,omitempty"`
}

// Store is the directory of pending-approval records, $CONCH_HOME/approvals. Records are
// written atomically (0600); state changes (Decide, Consume, Expire, Prune) re-read the
// record under an exclusive flock on approvals/.lock, so they are atomic and
// first-wins across goroutines and processes. Reads take no lock. A Store is safe for
// concurrent use; its zero value is not usable.
type Store struct {
	dir string

	// Now returns the current time; nil means time.Now. Tests set it.
	Now func() time.Time
}

// OpenStore returns the store in home, creating home/approvals (0700) if needed.
func OpenStore(home string) (*Store, error) {
	dir := filepath.Join(home, "approvals")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open approvals: %w", err)
	}
	return &Store{dir: dir}, nil
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) path(id string) string { return filepath.Join(s.dir, id+".json") }

// Create persists r as a new pending request and returns the stored copy: a new ID and
// Slug (an ID whose slug a stored record already has is never chosen), State pending,
// CreatedAtMs now if zero, ExpiresAtMs CreatedAtMs + DefaultTimeout if zero. Other fields
// are stored as given; r's ID, Slug and state-change fields are ignored. The record is on
// disk (and fsynced) when Create returns.
func (s *Store) Create(r Request) (*Request, error) {
	rec := r
	rec.State = Pending
	rec.Decision, rec.DecidedBy, rec.DecidedAtMs, rec.ConsumedAtMs = "", "", 0, 0
	if rec.CreatedAtMs == 0 {
		rec.CreatedAtMs = s.now().UnixMilli()
	}
	if rec.ExpiresAtMs == 0 {
		rec.ExpiresAtMs = rec.CreatedAtMs + DefaultTimeout.Milliseconds()
	}
	err := s.locked(func() error {
		for {
			rec.ID = newUUID()
			rec.Slug = rec.ID[:8]
			m, err := filepath.Glob(filepath.Join(s.dir, rec.Slug+"-*.json"))
			if err != nil {
				return err
			}
			if len(m) == 0 {
				break
			}
		}
		return s.write(&rec)
	})
	if err != nil {
		return nil, fmt.Errorf("create approval: %w", err)
	}
	return &rec, nil
}

// Get returns the record with the given id or slug (case-insensitive), or [ErrUnknown].
func (s *Store) Get(idOrSlug string) (*Request, error) {
	id, err := s.resolve(idOrSlug)
	if err != nil {
		return nil, err
	}
	return s.read(id)
}

// List returns the records in state (all records when state is ""), oldest first.
// Records that cannot be parsed (which only outside edits produce) are skipped.
func (s *Store) List(state State) ([]*Request, error) {
	names, err := filepath.Glob(filepath.Join(s.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []*Request
	for _, name := range names {
		id := strings.TrimSuffix(filepath.Base(name), ".json")
		if !isUUID(id) {
			continue
		}
		r, err := s.read(id)
		if errors.Is(err, ErrUnknown) {
			continue // removed meanwhile
		}
		if err != nil {
			var se *json.SyntaxError
			var te *json.UnmarshalTypeError
			if errors.As(err, &se) || errors.As(err, &te) {
				continue
			}
			return nil, fmt.Errorf("list approvals: %w", err)
		}
		if state == "" || r.State == state {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAtMs != out[j].CreatedAtMs {
			return out[i].CreatedAtMs < out[j].CreatedAtMs
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Decide records decision d by decidedBy (an operator name, or "agent" for a withdrawal)
// on the pending record idOrSlug and returns the updated record: state allowed for
// allow-once and allow-always, denied for deny. The first decision wins: a record that is
// no longer pending, or whose expiry has passed (it is left for [Store.Expire]), gives an
// *[AlreadyResolvedError]; an unknown id gives [ErrUnknown].
func (s *Store) Decide(idOrSlug string, d Decision, decidedBy string) (*Request, error) {
	state := Allowed
	switch d {
	case AllowOnce, AllowAlways:
	case Deny:
		state = Denied
	default:
		return nil, fmt.Errorf("decide approval: invalid decision %q", d)
	}
	var dropped *DroppedError
	r, err := s.transition(idOrSlug, func(r *Request, now time.Time) error {
		if r.State == Dropped {
			return &DroppedError{Slug: r.Slug, Reason: r.DropReason}
		}
		if r.State != Pending {
			return &AlreadyResolvedError{Slug: r.Slug, Resolution: resolution(r)}
		}
		if now.UnixMilli() >= r.ExpiresAtMs {
			return &AlreadyResolvedError{Slug: r.Slug, Resolution: string(Expired)}
		}
		if !r.Holder.alive() {
			// No decision can make it run: say so, and record it.
			r.State, r.DropReason, r.DecidedAtMs = Dropped, dropReason(r.Holder), now.UnixMilli()
			dropped = &DroppedError{Slug: r.Slug, Reason: r.DropReason}
			return nil
		}
		r.State, r.Decision, r.DecidedBy, r.DecidedAtMs = state, d, decidedBy, now.UnixMilli()
		return nil
	})
	if dropped != nil {
		return nil, dropped
	}
	return r, err
}

// Drop moves the pending record idOrSlug to [Dropped] with reason (its prepared run is
// gone) and returns it; a record no longer pending gives an *[AlreadyResolvedError].
func (s *Store) Drop(idOrSlug, reason string) (*Request, error) {
	return s.transition(idOrSlug, func(r *Request, now time.Time) error {
		if r.State != Pending {
			return &AlreadyResolvedError{Slug: r.Slug, Resolution: resolution(r)}
		}
		r.State, r.DropReason, r.DecidedAtMs = Dropped, reason, now.UnixMilli()
		return nil
	})
}

// HolderGone reports whether r's prepared run is gone with the process that held it.
func (r *Request) HolderGone() bool { return !r.Holder.alive() }

// resolution names how a resolved record was resolved, for AlreadyResolvedError.
func resolution(r *Request) string {
	if r.Decision != "" {
		return string(r.Decision)
	}
	return string(r.State)
}

// Consume moves an allowed record to consumed, atomically, and returns it: the approval
// authorises exactly one run, and the caller spawns only if Consume succeeds (allow-once
// is consumed once, before the spawn). A record in any other state gives an error wrapping [ErrNotAllowed].
func (s *Store) Consume(idOrSlug string) (*Request, error) {
	return s.transition(idOrSlug, func(r *Request, now time.Time) error {
		if r.State != Allowed {
			return fmt.Errorf("approval %s is %s: %w", r.Slug, r.State, ErrNotAllowed)
		}
		r.State, r.ConsumedAtMs = Consumed, now.UnixMilli()
		return nil
	})
}

// transition applies fn to the record under the store lock and writes it back if fn
// succeeds.
func (s *Store) transition(idOrSlug string, fn func(*Request, time.Time) error) (*Request, error) {
	id, err := s.resolve(idOrSlug)
	if err != nil {
		return nil, err
	}
	var rec *Request
	err = s.locked(func() error {
		r, err := s.read(id)
		if err != nil {
			return err
		}
		if err := fn(r, s.now()); err != nil {
			return err
		}
		rec = r
		return s.write(r)
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Expire moves every pending record whose expiry is at or before now to expired and
// returns those records; the caller applies askFallback to each.
// Records it returns were pending until this call, so each expiry is handled once even
// with several processes calling Expire.
func (s *Store) Expire(now time.Time) ([]*Request, error) {
	var out []*Request
	err := s.locked(func() error {
		pending, err := s.List(Pending)
		if err != nil {
			return err
		}
		for _, r := range pending {
			if r.ExpiresAtMs > now.UnixMilli() {
				continue
			}
			r.State, r.DecidedAtMs = Expired, now.UnixMilli()
			if err := s.write(r); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("expire approvals: %w", err)
	}
	return out, nil
}

// Prune deletes the records that left the pending state before the given time (resolved
// records are kept 15 s for late readers; the ledger keeps the history) and returns how many it deleted.
func (s *Store) Prune(before time.Time) (int, error) {
	n := 0
	err := s.locked(func() error {
		all, err := s.List("")
		if err != nil {
			return err
		}
		for _, r := range all {
			last := max(r.DecidedAtMs, r.ConsumedAtMs)
			if r.State == Pending || last >= before.UnixMilli() {
				continue
			}
			if err := os.Remove(s.path(r.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("prune approvals: %w", err)
	}
	return n, nil
}

// resolve maps an id or slug to a stored id.
func (s *Store) resolve(idOrSlug string) (string, error) {
	key := strings.ToLower(strings.TrimSpace(idOrSlug))
	if isUUID(key) {
		return key, nil
	}
	if len(key) != 8 || !isUUID(key+"-0000-0000-0000-000000000000") {
		return "", ErrUnknown
	}
	m, err := filepath.Glob(filepath.Join(s.dir, key+"-*.json"))
	if err != nil {
		return "", err
	}
	var ids []string
	for _, name := range m {
		if id := strings.TrimSuffix(filepath.Base(name), ".json"); isUUID(id) {
			ids = append(ids, id)
		}
	}
	switch len(ids) {
	case 0:
		return "", ErrUnknown
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("approval slug %s is ambiguous; use the full id", key)
}

func (s *Store) read(id string) (*Request, error) {
	data, err := os.ReadFile(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrUnknown
	}
	if err != nil {
		return nil, err
	}
	var r Request
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("approval %s: %w", id, err)
	}
	return &r, nil
}

func (s *Store) write(r *Request) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFile(s.path(r.ID), append(data, '\n'), 0o600)
}

// locked runs fn under the exclusive store lock. fn must not call locked.
func (s *Store) locked(fn func() error) error {
	lock, err := fsutil.LockFile(filepath.Join(s.dir, ".lock"))
	if err != nil {
		return err
	}
	defer lock.Close()
	return fn()
}
