// Package auth holds the credentials of a conch home:
// the agents and the sha256 of their bearer tokens in agents.json, and the
// operator token in operator.token. Tokens are shown once when created and
// only their hashes are stored; lookups compare in constant time.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/base/fsutil"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Errors callers branch on.
var (
	ErrExists  = errors.New("agent already exists")
	ErrUnknown = errors.New("unknown agent")
	ErrInvalid = errors.New("invalid agent id: use [a-z0-9][a-z0-9_-]{0,63}")
)

// errDamaged is the error of an agents.json the store did not write.
var errDamaged = errors.New("damaged (fix it or restore a copy; conch never overwrites it)")

var agentID = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Agent is one entry of agents.json.
type Agent struct {
	ID          string `json:"-"`
	TokenSHA256 string `json:"tokenSha256"`
	Workspace   string `json:"workspace,omitempty"`
	CreatedAt   int64  `json:"createdAt"`
}

type file struct {
	Agents map[string]*Agent `json:"agents"`
}

// Store is the agents file of a home. It is safe for concurrent use;
// writes hold a flock so that several processes never interleave.
type Store struct {
	home string
	mu   sync.Mutex // guards cache
	// cache is the file as last read, with its modification time.
	cache *file
	mtime time.Time
}

// Open returns the store of home (nothing is read yet).
func Open(home string) *Store { return &Store{home: home} }

func (s *Store) path() string { return filepath.Join(s.home, "agents.json") }

// NewToken returns prefix + 43 base64url characters (32 random bytes).
func NewToken(prefix string) string {
	var b [32]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func (s *Store) read() (*file, error) {
	fi, err := os.Stat(s.path())
	if errors.Is(err, os.ErrNotExist) {
		return &file{Agents: map[string]*Agent{}}, nil
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache != nil && fi.ModTime().Equal(s.mtime) {
		return s.cache, nil
	}
	b, err := os.ReadFile(s.path())
	if err != nil {
		return nil, err
	}
	// The store writes valid UTF-8 and always an "agents" object: a file
	// without them is damaged, and is refused rather than read as empty
	// (the next change would then rewrite it without its agents).
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("agents.json: %w", errDamaged)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("agents.json: %w", err)
	}
	if f.Agents == nil {
		return nil, fmt.Errorf("agents.json: no \"agents\" object: %w", errDamaged)
	}
	for id, a := range f.Agents {
		a.ID = id
	}
	s.cache, s.mtime = &f, fi.ModTime()
	return &f, nil
}

// update runs fn on the file under an exclusive lock and writes it back
// atomically (0600).
func (s *Store) update(fn func(*file) error) error {
	if err := os.MkdirAll(s.home, 0o700); err != nil {
		return err
	}
	lf, err := fsutil.LockFile(s.path() + ".lock")
	if err != nil {
		return err
	}
	defer lf.Close()
	s.mu.Lock()
	s.cache = nil
	s.mu.Unlock()
	f, err := s.read()
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	if err := fsutil.WriteFile(s.path(), append(b, '\n'), 0o600); err != nil {
		return err
	}
	s.mu.Lock()
	s.cache = nil
	s.mu.Unlock()
	return nil
}

// Exists reports whether agents.json exists.
func (s *Store) Exists() bool {
	_, err := os.Stat(s.path())
	return err == nil
}

// List returns the agents sorted by id.
func (s *Store) List() ([]Agent, error) {
	f, err := s.read()
	if err != nil {
		return nil, err
	}
	var out []Agent
	for _, a := range f.Agents {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Get returns one agent.
func (s *Store) Get(id string) (Agent, error) {
	f, err := s.read()
	if err != nil {
		return Agent{}, err
	}
	a, ok := f.Agents[id]
	if !ok {
		return Agent{}, ErrUnknown
	}
	return *a, nil
}

// Add creates an agent and returns its token, which is not stored.
func (s *Store) Add(id, workspace string) (string, error) {
	if !agentID.MatchString(id) {
		return "", ErrInvalid
	}
	token := NewToken("cat_")
	err := s.update(func(f *file) error {
		if _, ok := f.Agents[id]; ok {
			return fmt.Errorf("%w: %s", ErrExists, id)
		}
		f.Agents[id] = &Agent{ID: id, TokenSHA256: hash(token), Workspace: workspace, CreatedAt: time.Now().UnixMilli()}
		return nil
	})
	return token, err
}

// Remove deletes an agent; its token stops working at once.
func (s *Store) Remove(id string) error {
	return s.update(func(f *file) error {
		if _, ok := f.Agents[id]; !ok {
			return ErrUnknown
		}
		delete(f.Agents, id)
		return nil
	})
}

// Rotate replaces an agent's token and returns the new one.
func (s *Store) Rotate(id string) (string, error) {
	token := NewToken("cat_")
	err := s.update(func(f *file) error {
		a, ok := f.Agents[id]
		if !ok {
			return ErrUnknown
		}
		a.TokenSHA256 = hash(token)
		return nil
	})
	return token, err
}

// Lookup returns the agent a bearer token belongs to. Every stored hash is
// compared, in constant time, whatever matches.
func (s *Store) Lookup(token string) (string, bool) {
	if !strings.HasPrefix(token, "cat_") {
		return "", false
	}
	f, err := s.read()
	if err != nil {
		return "", false
	}
	h := []byte(hash(token))
	found := ""
	for id, a := range f.Agents {
		if subtle.ConstantTimeCompare(h, []byte(a.TokenSHA256)) == 1 {
			found = id
		}
	}
	return found, found != ""
}

// operatorTokenRE is the form of every operator token NewToken makes.
var operatorTokenRE = regexp.MustCompile(`^cop_[A-Za-z0-9_-]{43}$`)

// OperatorTokenPath is where a home keeps its operator token.
func OperatorTokenPath(home string) string { return filepath.Join(home, "operator.token") }

// ReadOperatorToken returns the operator token of home. A missing file is
// reported with an error wrapping fs.ErrNotExist; an empty or malformed one
// (a write cut short by a full disk or a crash, an edit gone wrong) with an
// error that says so, never as a token.
func ReadOperatorToken(home string) (string, error) {
	p := OperatorTokenPath(home)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty (a write that failed, e.g. on a full disk): remove it and start conch serve again to create a new token", p)
	}
	if !operatorTokenRE.MatchString(tok) {
		return "", fmt.Errorf("%s is damaged (not cop_ and 43 base64url characters): remove it and start conch serve again to create a new token", p)
	}
	return tok, nil
}

// OperatorToken returns the operator token of home, creating it (0600) on
// first use. The file appears complete or not at all (a full disk makes
// this fail, with nothing left behind).
func OperatorToken(home string) (string, error) {
	tok, err := ReadOperatorToken(home)
	if !errors.Is(err, os.ErrNotExist) {
		return tok, err
	}
	tok = NewToken("cop_")
	err = fsutil.CreateFile(OperatorTokenPath(home), []byte(tok+"\n"), 0o600)
	if errors.Is(err, os.ErrExist) {
		return ReadOperatorToken(home) // another process made it first
	}
	if err != nil {
		return "", fmt.Errorf("create operator token: %w", err)
	}
	return tok, nil
}

// Equal compares two secrets in constant time.
func Equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
