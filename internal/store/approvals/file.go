package approvals

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/base/fsutil"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// FileName is the approvals file's name inside the conch home.
const FileName = "exec-approvals.json"

// Agent ids with a special meaning in [File.Agents].
const (
	// AnyAgent is the agent id whose settings and allowlist apply to every agent.
	AnyAgent = "*"
	// MainAgent is the agent id used when a caller names none.
	MainAgent = "main"
	// legacyDefaultAgent is OpenClaw's old name for the main agent, merged into it on load.
	legacyDefaultAgent = "default"
)

// maxCommandLen is the most characters of lastUsedCommand kept.
const maxCommandLen = 500

// emptyHash is the hash of a missing file: sha256 of no bytes.
var emptyHash = hashBytes(nil)

// ErrConflict is returned by [Save] when the file on disk no longer has the caller's base
// hash. Its text is the one the API and CLI show (HTTP 409).
var ErrConflict = errors.New("exec approvals changed; reload and retry")

// UnreadableError reports an approvals file that exists but cannot be used: unreadable,
// not valid JSON, of the wrong version, or with an invalid value. Host execution is then
// denied; the caller shows "exec denied: " followed by the error's text.
type UnreadableError struct {
	Path string // the file
	Err  error  // what is wrong, without the path
}

func (e *UnreadableError) Error() string {
	return "approvals file unreadable (" + e.Err.Error() + ")"
}

func (e *UnreadableError) Unwrap() error { return e.Err }

// File is the approvals file, OpenClaw-compatible. Unknown members at every
// level (for example OpenClaw's top-level "socket") are kept in the Extra maps and written
// back unchanged.
//
// The zero File is an empty file of no version; [Load] of a missing file returns an empty
// file of version 1. A File is a plain value: it is not safe for concurrent mutation.
type File struct {
	Version  int               // must be 1
	Defaults Defaults          // "defaults"
	Agents   map[string]*Agent // "agents", by agent id; AnyAgent applies to all

	// Extra holds the unknown top-level members, by name, as raw JSON.
	Extra map[string]json.RawMessage

	raw    []byte // the bytes read from disk or last written; nil if none
	exists bool   // whether the file existed when read or has been written
}

// Defaults are the file-wide policy values. An empty string means unset.
type Defaults struct {
	Security        string // "deny", "allowlist" or "full"
	Ask             string // "off", "on-miss" or "always"
	AskFallback     string // "deny", "allowlist" or "full"
	AutoAllowSkills *bool  // preserved; conch has no skills, so it has no effect

	Extra map[string]json.RawMessage // unknown members
}

// Agent is the per-agent part of the file. An empty string means unset.
type Agent struct {
	Security    string
	Ask         string
	AskFallback string
	Allowlist   []Entry

	Extra map[string]json.RawMessage // unknown members, such as OpenClaw's autoAllowSkills
}

// Entry is one allowlist entry.
type Entry struct {
	ID               string // a UUID; assigned on load when missing
	Pattern          string // an executable path or glob
	LastUsedAt       int64  // Unix milliseconds of the last hit; 0 if never
	LastUsedCommand  string // the command text of the last hit, at most 500 characters
	LastResolvedPath string // the resolved executable of the last hit
	Source           string // "allow-always" for entries conch persisted

	Extra map[string]json.RawMessage // unknown members
}

// Path returns the approvals file's path in the conch home.
func Path(home string) string { return filepath.Join(home, FileName) }

func lockPath(home string) string { return Path(home) + ".lock" }

// Hash returns the lowercase hex sha256 of the file's bytes on disk as last read or
// written: the baseHash for [Save]. A missing file (and a File not read from disk) has the
// hash of no bytes.
func (f *File) Hash() string {
	if f.raw == nil {
		return emptyHash
	}
	return hashBytes(f.raw)
}

// Exists reports whether the file existed when it was loaded, or has since been saved.
func (f *File) Exists() bool { return f.exists }

func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Load reads the approvals file in home. Reads never write. A missing file is an empty
// version-1 file whose Exists is false. A file that cannot be read or parsed, or has a
// version other than 1, gives an *[UnreadableError].
//
// The result is normalised in memory only: the legacy agent "default" is
// merged into "main", string entries become {pattern}, entries without a pattern are
// dropped and entries without an id get a new UUID. None of this is written until the
// next write.
func Load(home string) (*File, error) {
	path := Path(home)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &File{Version: 1, Agents: map[string]*Agent{}}, nil
	}
	if err != nil {
		return nil, &UnreadableError{Path: path, Err: err}
	}
	f, err := Parse(data)
	if err != nil {
		var ue *UnreadableError
		if errors.As(err, &ue) {
			ue.Path = path
		}
		return nil, err
	}
	f.exists = true
	return f, nil
}

// Parse parses and normalises approvals-file JSON (see [Load]), for files that do not come
// from the home, such as `conch approvals set` input or an OpenClaw file being imported.
// Errors are *[UnreadableError] values. The result's Hash is that of data.
func Parse(data []byte) (*File, error) {
	f, err := parse(data)
	if err != nil {
		return nil, &UnreadableError{Err: err}
	}
	f.raw = slices.Clone(data)
	if f.raw == nil {
		f.raw = []byte{}
	}
	return f, nil
}

func parse(data []byte) (*File, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, err
	}
	if top == nil {
		return nil, errors.New("not a JSON object")
	}
	f := &File{Agents: map[string]*Agent{}}
	raw, ok := top["version"]
	if !ok {
		return nil, errors.New("missing version")
	}
	delete(top, "version")
	var version float64
	if err := json.Unmarshal(raw, &version); err != nil {
		return nil, errors.New("version: not a number")
	}
	if version != 1 {
		return nil, fmt.Errorf("unsupported version %s", raw)
	}
	f.Version = 1

	if raw, ok := top["defaults"]; ok {
		delete(top, "defaults")
		obj, err := object(raw, "defaults")
		if err != nil {
			return nil, err
		}
		if obj != nil {
			if err := f.Defaults.decode(obj); err != nil {
				return nil, err
			}
		}
	}
	if raw, ok := top["agents"]; ok {
		delete(top, "agents")
		obj, err := object(raw, "agents")
		if err != nil {
			return nil, err
		}
		for id, raw := range obj {
			a, err := object(raw, "agents."+quoteID(id))
			if err != nil {
				return nil, err
			}
			if a == nil {
				continue
			}
			agent := &Agent{}
			if err := agent.decode(a, "agents."+quoteID(id)); err != nil {
				return nil, err
			}
			f.Agents[id] = agent
		}
	}
	if len(top) > 0 {
		f.Extra = top
	}
	f.normalize()
	return f, nil
}

// object decodes raw as a JSON object; null gives a nil map.
func object(raw json.RawMessage, what string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("%s: not an object", what)
	}
	return obj, nil
}

// quoteID renders an agent id in the labels of errors and rule sources: agents.main,
// agents."*".
func quoteID(id string) string {
	if id == AnyAgent {
		return `"*"`
	}
	return id
}

var (
	securityValues = []string{"deny", "allowlist", "full"}
	askValues      = []string{"off", "on-miss", "always"}
)

// takeEnum removes key from obj and stores its string value in *dst after checking it is
// one of values. null and "" leave *dst unset. An invalid value is an error: ignoring it
// could loosen the policy its author meant.
func takeEnum(obj map[string]json.RawMessage, key, where string, values []string, dst *string) error {
	raw, ok := obj[key]
	if !ok {
		return nil
	}
	delete(obj, key)
	var s *string
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("%s.%s: not a string", where, key)
	}
	if s == nil || *s == "" {
		return nil
	}
	if !slices.Contains(values, *s) {
		return fmt.Errorf("%s.%s: invalid value %q (want %s)", where, key, *s, strings.Join(values, ", "))
	}
	*dst = *s
	return nil
}

func (d *Defaults) decode(obj map[string]json.RawMessage) error {
	if err := takeEnum(obj, "security", "defaults", securityValues, &d.Security); err != nil {
		return err
	}
	if err := takeEnum(obj, "ask", "defaults", askValues, &d.Ask); err != nil {
		return err
	}
	if err := takeEnum(obj, "askFallback", "defaults", securityValues, &d.AskFallback); err != nil {
		return err
	}
	if raw, ok := obj["autoAllowSkills"]; ok {
		delete(obj, "autoAllowSkills")
		if err := json.Unmarshal(raw, &d.AutoAllowSkills); err != nil {
			return errors.New("defaults.autoAllowSkills: not a boolean")
		}
	}
	if len(obj) > 0 {
		d.Extra = obj
	}
	return nil
}

func (a *Agent) decode(obj map[string]json.RawMessage, where string) error {
	if err := takeEnum(obj, "security", where, securityValues, &a.Security); err != nil {
		return err
	}
	if err := takeEnum(obj, "ask", where, askValues, &a.Ask); err != nil {
		return err
	}
	if err := takeEnum(obj, "askFallback", where, securityValues, &a.AskFallback); err != nil {
		return err
	}
	if raw, ok := obj["allowlist"]; ok {
		delete(obj, "allowlist")
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("%s.allowlist: not an array", where)
		}
		for _, raw := range list {
			if e, ok := decodeEntry(raw); ok {
				a.Allowlist = append(a.Allowlist, e)
			}
		}
	}
	if len(obj) > 0 {
		a.Extra = obj
	}
	return nil
}

// decodeEntry decodes one allowlist element: a string is a bare pattern; an object needs a
// non-empty string pattern. Anything else is dropped (ok false). Known members of the wrong
// type are dropped too; they carry no policy.
func decodeEntry(raw json.RawMessage) (Entry, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return Entry{Pattern: s}, strings.TrimSpace(s) != ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return Entry{}, false
	}
	var e Entry
	str := func(key string, dst *string) {
		if raw, ok := obj[key]; ok {
			delete(obj, key)
			json.Unmarshal(raw, dst) // a wrong type leaves *dst empty
		}
	}
	str("id", &e.ID)
	str("pattern", &e.Pattern)
	str("lastUsedCommand", &e.LastUsedCommand)
	str("lastResolvedPath", &e.LastResolvedPath)
	str("source", &e.Source)
	if raw, ok := obj["lastUsedAt"]; ok {
		delete(obj, "lastUsedAt")
		var ms float64
		if json.Unmarshal(raw, &ms) == nil {
			e.LastUsedAt = int64(ms)
		}
	}
	if len(obj) > 0 {
		e.Extra = obj
	}
	return e, strings.TrimSpace(e.Pattern) != ""
}

// normalize applies the load normalisation that decoding has not done
// already: the legacy "default" agent merged into "main", and missing ids.
func (f *File) normalize() {
	if f.Agents == nil {
		f.Agents = map[string]*Agent{}
	}
	if legacy, ok := f.Agents[legacyDefaultAgent]; ok {
		delete(f.Agents, legacyDefaultAgent)
		if main, ok := f.Agents[MainAgent]; ok && main != nil && legacy != nil {
			f.Agents[MainAgent] = mergeLegacy(main, legacy)
		} else if legacy != nil {
			f.Agents[MainAgent] = legacy
		}
	}
	for id, a := range f.Agents {
		if a == nil {
			delete(f.Agents, id)
			continue
		}
		for i := range a.Allowlist {
			if a.Allowlist[i].ID == "" {
				a.Allowlist[i].ID = newUUID()
			}
		}
	}
}

// mergeLegacy merges OpenClaw's legacy "default" agent into main: main's values win, the
// allowlists are concatenated (main's first) and deduplicated by trimmed, lower-cased
// pattern.
func mergeLegacy(main, legacy *Agent) *Agent {
	m := &Agent{
		Security:    firstSet(main.Security, legacy.Security),
		Ask:         firstSet(main.Ask, legacy.Ask),
		AskFallback: firstSet(main.AskFallback, legacy.AskFallback),
		Extra:       mergeExtra(main.Extra, legacy.Extra),
	}
	seen := map[string]bool{}
	for _, e := range slices.Concat(main.Allowlist, legacy.Allowlist) {
		key := patternKey(e.Pattern)
		if seen[key] {
			continue
		}
		seen[key] = true
		m.Allowlist = append(m.Allowlist, e)
	}
	return m
}

// firstSet returns the first non-empty string.
func firstSet(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// mergeExtra returns the members of a, plus those of b that a lacks.
func mergeExtra(a, b map[string]json.RawMessage) map[string]json.RawMessage {
	if len(b) == 0 {
		return a
	}
	m := make(map[string]json.RawMessage, len(a)+len(b))
	for k, v := range b {
		m[k] = v
	}
	for k, v := range a {
		m[k] = v
	}
	return m
}

// patternKey is the form in which two patterns are the same entry: trimmed, lower-cased.
func patternKey(p string) string { return strings.ToLower(strings.TrimSpace(p)) }

// InvalidError is a file that [Save] or [Update] refused to write because
// it is not valid (the caller's mistake), as opposed to a failure to write
// it (the machine's).
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// validate checks what a write must not get wrong.
func (f *File) validate() error {
	if f.Version != 1 {
		return fmt.Errorf("unsupported version %d", f.Version)
	}
	check := func(where, key, v string, values []string) error {
		if v != "" && !slices.Contains(values, v) {
			return fmt.Errorf("%s.%s: invalid value %q (want %s)", where, key, v, strings.Join(values, ", "))
		}
		return nil
	}
	d := f.Defaults
	if err := errors.Join(
		check("defaults", "security", d.Security, securityValues),
		check("defaults", "ask", d.Ask, askValues),
		check("defaults", "askFallback", d.AskFallback, securityValues)); err != nil {
		return err
	}
	for id, a := range f.Agents {
		if a == nil {
			continue
		}
		where := "agents." + quoteID(id)
		if err := errors.Join(
			check(where, "security", a.Security, securityValues),
			check(where, "ask", a.Ask, askValues),
			check(where, "askFallback", a.AskFallback, securityValues)); err != nil {
			return err
		}
		for i, e := range a.Allowlist {
			if strings.TrimSpace(e.Pattern) == "" {
				return fmt.Errorf("%s.allowlist[%d]: empty pattern", where, i)
			}
		}
	}
	return nil
}

// MarshalJSON encodes the file compactly: known members in a fixed order, then the unknown
// ones sorted by name. Empty optional members are left out.
func (f *File) MarshalJSON() ([]byte, error) {
	var o objectWriter
	o.field("version", f.Version)
	if d, err := f.Defaults.marshal(); err != nil {
		return nil, err
	} else if string(d) != "{}" {
		o.raw("defaults", d)
	}
	ids := make([]string, 0, len(f.Agents))
	for id, a := range f.Agents {
		if a != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var agents objectWriter
	for _, id := range ids {
		a, err := f.Agents[id].marshal()
		if err != nil {
			return nil, err
		}
		agents.raw(id, a)
	}
	o.raw("agents", agents.bytes())
	o.extra(f.Extra)
	return o.result()
}

// UnmarshalJSON parses and normalises approvals-file JSON like [Parse], so that API request
// bodies can carry a File. Errors are *[UnreadableError] values.
func (f *File) UnmarshalJSON(data []byte) error {
	p, err := Parse(data)
	if err != nil {
		return err
	}
	*f = *p
	return nil
}

// Encode returns the file as written to disk: two-space indented JSON and a trailing
// newline.
func (f *File) Encode() ([]byte, error) {
	compact, err := f.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, compact, "", "  "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

func (d *Defaults) marshal() ([]byte, error) {
	var o objectWriter
	o.str("security", d.Security)
	o.str("ask", d.Ask)
	o.str("askFallback", d.AskFallback)
	if d.AutoAllowSkills != nil {
		o.field("autoAllowSkills", *d.AutoAllowSkills)
	}
	o.extra(d.Extra)
	return o.result()
}

func (a *Agent) marshal() ([]byte, error) {
	var o objectWriter
	o.str("security", a.Security)
	o.str("ask", a.Ask)
	o.str("askFallback", a.AskFallback)
	if a.Allowlist != nil {
		var b bytes.Buffer
		b.WriteByte('[')
		for i := range a.Allowlist {
			if i > 0 {
				b.WriteByte(',')
			}
			e, err := a.Allowlist[i].marshal()
			if err != nil {
				return nil, err
			}
			b.Write(e)
		}
		b.WriteByte(']')
		o.raw("allowlist", b.Bytes())
	}
	o.extra(a.Extra)
	return o.result()
}

func (e *Entry) marshal() ([]byte, error) {
	var o objectWriter
	o.str("id", e.ID)
	o.field("pattern", e.Pattern)
	if e.LastUsedAt != 0 {
		o.field("lastUsedAt", e.LastUsedAt)
	}
	o.str("lastUsedCommand", e.LastUsedCommand)
	o.str("lastResolvedPath", e.LastResolvedPath)
	o.str("source", e.Source)
	o.extra(e.Extra)
	return o.result()
}

// objectWriter builds a compact JSON object with members in the order they are added.
type objectWriter struct {
	b   bytes.Buffer
	n   int
	err error
}

func (o *objectWriter) raw(key string, value []byte) {
	if o.n == 0 {
		o.b.WriteByte('{')
	} else {
		o.b.WriteByte(',')
	}
	o.n++
	k, _ := marshal(key) // strings always encode
	o.b.Write(k)
	o.b.WriteByte(':')
	o.b.Write(value)
}

func (o *objectWriter) field(key string, v any) {
	b, err := marshal(v)
	if err != nil {
		o.err = errors.Join(o.err, fmt.Errorf("%s: %w", key, err))
		return
	}
	o.raw(key, b)
}

// str adds a string member unless it is empty.
func (o *objectWriter) str(key, v string) {
	if v != "" {
		o.field(key, v)
	}
}

// extra adds the unknown members, sorted by name.
func (o *objectWriter) extra(m map[string]json.RawMessage) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !json.Valid(m[k]) {
			o.err = errors.Join(o.err, fmt.Errorf("%s: invalid JSON", k))
			continue
		}
		o.raw(k, m[k])
	}
}

func (o *objectWriter) bytes() []byte {
	if o.n == 0 {
		return []byte("{}")
	}
	return append(o.b.Bytes(), '}')
}

func (o *objectWriter) result() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	return o.bytes(), nil
}

// marshal is json.Marshal without HTML escaping, so patterns stay readable.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Save writes f as the approvals file in home if the file on disk still has baseHash (see
// [File.Hash]; for a missing file both "" and the hash of no bytes match); otherwise it
// returns [ErrConflict] and writes nothing. The check and the write happen under the
// exclusive lock on exec-approvals.json.lock, so concurrent writers in any process are
// serialised. The write is atomic (see the package comment); the home is created 0700 if
// missing. On success f's Hash is that of the new content.
//
// Save normalises f first (ids for entries without one) and refuses an invalid f: a version
// other than 1, an unknown security, ask or askFallback value, or an empty pattern.
func Save(home string, f *File, baseHash string) error {
	return SaveRecorded(home, f, baseHash, nil)
}

// SaveRecorded is [Save], and then, still under the lock, calls record (when not nil) with
// the file the write replaced (as [Load] would have returned it; nil when it was unreadable)
// and f. A record of the change made there (the ledger's policy record) names the change's
// true predecessor, and records of concurrent changes are in the order of the changes.
func SaveRecorded(home string, f *File, baseHash string, record func(old, new *File)) error {
	f.normalize()
	if err := f.validate(); err != nil {
		return fmt.Errorf("save approvals file: %w", &InvalidError{Err: err})
	}
	data, err := f.Encode()
	if err != nil {
		return fmt.Errorf("save approvals file: %w", err)
	}
	err = withLock(home, func(cur []byte, exists bool) error {
		if !hashMatches(cur, exists, baseHash) {
			return ErrConflict
		}
		if err := fsutil.WriteFile(Path(home), data, 0o600); err != nil {
			return err
		}
		if record != nil {
			f.raw, f.exists = data, true
			record(loaded(cur, exists), f)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return err
		}
		return fmt.Errorf("save approvals file: %w", err)
	}
	f.raw, f.exists = data, true
	return nil
}

func hashMatches(cur []byte, exists bool, baseHash string) bool {
	if !exists {
		return baseHash == "" || baseHash == emptyHash
	}
	return strings.EqualFold(baseHash, hashBytes(cur))
}

// Change describes the file before and after [Update].
type Change struct {
	OldHash string // the hash before; that of no bytes if the file was missing
	NewHash string // the hash after
	Written bool   // false when the update left the file's bytes unchanged
}

// Update reads the approvals file in home, calls fn with it and writes the result, all
// under the exclusive lock on exec-approvals.json.lock, so that concurrent read-modify-write
// cycles in any number of processes never lose each other's changes. If fn returns an
// error nothing is written and Update returns an error wrapping it. If the result encodes to the
// bytes already on disk nothing is written either. An unreadable file is never overwritten:
// Update returns an error wrapping its *[UnreadableError] without calling fn. Like [Save],
// Update normalises and validates the result and creates home if needed.
func Update(home string, fn func(*File) error) (Change, error) {
	return UpdateRecorded(home, fn, nil)
}

// UpdateRecorded is [Update], and then, when it wrote the file, still under the lock, calls
// record (when not nil) with the file before and after, so that a record of the change
// (the ledger's policy record) names its true predecessor and records of concurrent
// changes are in the order of the changes.
func UpdateRecorded(home string, fn func(*File) error, record func(old, new *File)) (Change, error) {
	var ch Change
	err := withLock(home, func(cur []byte, exists bool) error {
		ch.OldHash = emptyHash
		f := &File{Version: 1, Agents: map[string]*Agent{}}
		if exists {
			ch.OldHash = hashBytes(cur)
			var err error
			if f, err = Parse(cur); err != nil {
				var ue *UnreadableError
				if errors.As(err, &ue) {
					ue.Path = Path(home)
				}
				return err
			}
			f.exists = true
		}
		if err := fn(f); err != nil {
			return err
		}
		f.normalize()
		if err := f.validate(); err != nil {
			return &InvalidError{Err: err}
		}
		data, err := f.Encode()
		if err != nil {
			return err
		}
		ch.NewHash = hashBytes(data)
		if exists && bytes.Equal(data, cur) {
			return nil
		}
		if err := fsutil.WriteFile(Path(home), data, 0o600); err != nil {
			return err
		}
		ch.Written = true
		if record != nil {
			nf := *f
			nf.raw, nf.exists = data, true
			record(loaded(cur, exists), &nf)
		}
		return nil
	})
	if err != nil {
		return Change{}, fmt.Errorf("update approvals file: %w", err)
	}
	return ch, nil
}

// loaded is the file of bytes cur as [Load] returns it, or nil when unreadable.
func loaded(cur []byte, exists bool) *File {
	if !exists {
		return &File{Version: 1, Agents: map[string]*Agent{}}
	}
	f, err := Parse(cur)
	if err != nil {
		return nil
	}
	f.exists = true
	return f
}

// withLock creates home (0700) if needed, takes the approvals file lock and calls fn with
// the file's current bytes.
func withLock(home string, fn func(cur []byte, exists bool) error) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	lock, err := fsutil.LockFile(lockPath(home))
	if err != nil {
		return err
	}
	defer lock.Close()
	cur, err := os.ReadFile(Path(home))
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &UnreadableError{Path: Path(home), Err: err}
	}
	return fn(cur, exists)
}
