// Package shim finds conch-shim, the small program that runs under every
// command conch starts (a session's supervisor, `supervise`, and a
// sandbox's init, `sandbox-init`), and checks that it speaks this conch's
// protocol.
//
// conch-shim holds only those two jobs, so it starts in a few
// milliseconds where the whole conch binary (the gateway, the CLI,
// client-go, the exporters) takes several times that. The engine looks
// for it beside its own executable, then on PATH, then in the build cache
// that a conch run from a module checkout (`go run ./cmd/conch`) fills
// (cache.go); when none answers the handshake it re-executes its own
// binary, which carries the same entry points (package entry), and says
// so in one line (Program.Note).
//
// The protocol is one version for everything the two programs exchange:
// the supervisor's spec, ready report and control socket, and the
// options of sandbox-init. A shim and a conch of different protocols
// refuse each other: the handshake at Locate, and $CONCH_SHIM_PROTOCOL
// at every supervisor start (a shim replaced while conch runs).
package shim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Name is the shim's file name.
const Name = "conch-shim"

// protocol is the protocol version; a var so that a test can build a shim
// of another version (-ldflags -X). Bump it with any change to what
// supervise or sandbox-init accept or answer.
var protocol = "1"

// Protocol is the protocol version this program speaks.
func Protocol() string { return protocol }

// ErrSkew is the class of a shim and a conch of different protocol
// versions (errors.Is).
var ErrSkew = errors.New("conch-shim protocol skew")

// SkewError is a shim that speaks another protocol than this conch.
type SkewError struct {
	Path   string // the shim's executable
	Theirs string // its protocol version; "" when it did not answer
	Ours   string
}

func (e *SkewError) Error() string {
	theirs := "no handshake (an older conch-shim)"
	if e.Theirs != "" {
		theirs = "protocol " + e.Theirs
	}
	return fmt.Sprintf("%s speaks %s, this conch protocol %s: install both from one version (go install ./cmd/...)", e.Path, theirs, e.Ours)
}

// Unwrap makes errors.Is(err, ErrSkew) hold.
func (e *SkewError) Unwrap() error { return ErrSkew }

// Answer is the line a shim prints for `handshake N`.
func Answer() string { return Name + " protocol " + protocol }

// Handshake runs `path handshake PROTOCOL` and returns nil when the
// program at path speaks this protocol, a *SkewError when it speaks
// another (or does not answer the handshake), and another error when it
// cannot run at all.
func Handshake(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "handshake", protocol)
	cmd.Stdout = &out
	cmd.Env = []string{} // nothing of ours is for it
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return fmt.Errorf("run %s: %w", path, err)
	}
	theirs, ok := strings.CutPrefix(strings.TrimSpace(out.String()), Name+" protocol ")
	if !ok {
		theirs = ""
	}
	if err != nil || theirs != protocol {
		return &SkewError{Path: path, Theirs: theirs, Ours: protocol}
	}
	return nil
}

// From says where a Program was found.
type From string

const (
	FromBeside From = "beside" // next to this executable
	FromPath   From = "path"   // on PATH
	FromCache  From = "cache"  // built for a module checkout (cache.go)
	FromSelf   From = "self"   // none: this executable re-executed
	FromEnv    From = "env"    // $CONCH_SHIM
)

// Program is the executable that runs supervisors and sandbox inits.
type Program struct {
	// Path is the executable; its first argument is "supervise" or
	// "sandbox-init".
	Path string
	From From
	// Note is one line for an operator when the fast path is not taken
	// (From is FromSelf, or a shim was refused), with the fix; "" when
	// the shim runs.
	Note string
}

// Fast reports whether commands start under the shim.
func (p Program) Fast() bool { return p.From != FromSelf }

// SuperviseArgv is the command that starts a supervisor: the words
// "--home H" and the rest are appended by the caller, and its
// environment carries ProtocolEnv (SuperviseEnv).
func (p Program) SuperviseArgv() []string { return []string{p.Path, "supervise"} }

// ProtocolEnv is the environment variable that tells a supervisor the
// protocol of the conch that started it; a shim of another protocol
// refuses to run (package entry). It travels in the environment rather
// than argv so that a supervisor's command line stays `… supervise
// --home H`, as operators' pgrep patterns have it.
const ProtocolEnv = "CONCH_SHIM_PROTOCOL"

// SuperviseEnv is the variable to add to a supervisor's environment.
func SuperviseEnv() string { return ProtocolEnv + "=" + protocol }

var (
	locateOnce sync.Once
	located    Program
)

// Locate returns the program this process starts its supervisors and
// sandbox inits with, found once per process: $CONCH_SHIM when set (a
// path, or "self" for this executable), else conch-shim beside this
// executable, else on PATH, else the one built for this checkout
// (cache.go; a build is started in the background when there is none),
// else this executable. A shim that fails the handshake is passed over
// and named in Note.
func Locate() Program {
	locateOnce.Do(func() { located = locate(context.Background()) })
	return located
}

func locate(ctx context.Context) Program {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	selfProg := func(note string) Program { return Program{Path: self, From: FromSelf, Note: note} }
	switch env := os.Getenv("CONCH_SHIM"); env {
	case "":
	case "self":
		return selfProg("")
	default:
		if err := Handshake(ctx, env); err != nil {
			return selfProg(fmt.Sprintf("CONCH_SHIM=%s is refused (%v); commands start under the full conch binary", env, err))
		}
		return Program{Path: env, From: FromEnv}
	}
	var refused []string
	try := func(path string, from From) (Program, bool) {
		if err := Handshake(ctx, path); err != nil {
			refused = append(refused, err.Error())
			return Program{}, false
		}
		return Program{Path: path, From: from}, true
	}
	if p := filepath.Join(filepath.Dir(self), Name+exeSuffix); isExecutable(p) {
		if prog, ok := try(p, FromBeside); ok {
			return prog
		}
	}
	if p, err := exec.LookPath(Name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if prog, ok := try(p, FromPath); ok {
			return prog
		}
	}
	cached, building := fromCache(ctx, self)
	if cached != "" {
		if prog, ok := try(cached, FromCache); ok {
			return prog
		}
	}
	if building {
		pendingMu.Lock()
		pending = cachePath(self)
		pendingMu.Unlock()
	}
	note := "no " + Name + " beside " + self + " or on PATH: every command starts under the full conch binary (about 4x the start-up CPU); fix: go install ./cmd/... (installs conch and " + Name + ")"
	if building {
		note = "no " + Name + " yet: building one for this checkout in the background (used as soon as it is built); until then commands start under the full conch binary"
	}
	if len(refused) > 0 {
		note = strings.Join(refused, "; ") + "; commands start under the full conch binary"
	}
	return selfProg(note)
}

var (
	pendingMu sync.Mutex // guards pending and upgraded
	// pending is where the shim this process is building will appear.
	pending string
	// upgraded is that shim once it answered the handshake.
	upgraded *Program
)

// Current is the program to start a supervisor or a sandbox init with
// now: Locate's, or, once the shim this process started building in the
// background is there and answers the handshake, that shim. Callers that
// start processes ask it each time, so a conch started by go run reaches
// the fast path as soon as its shim is built.
func Current() Program {
	p := Locate()
	if p.Fast() {
		return p
	}
	pendingMu.Lock()
	defer pendingMu.Unlock()
	if upgraded != nil {
		return *upgraded
	}
	if pending == "" || !isExecutable(pending) {
		return p
	}
	path := pending
	pending = "" // one handshake: a shim that fails it stays unused
	if Handshake(context.Background(), path) != nil {
		return p
	}
	upgraded = &Program{Path: path, From: FromCache}
	return *upgraded
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	// Windows has no execute bits: its programs are the .exe files.
	return err == nil && fi.Mode().IsRegular() && (fi.Mode()&0o111 != 0 || exeSuffix != "")
}
