// Package engine is conch's embeddable core: it implements the exec and
// process tools over supervised, journaled sessions in one conch home.
//
// An Engine owns a home directory ($CONCH_HOME): it takes the home's engine
// lock, reattaches the sessions that supervisors kept running while no
// engine was up, starts new sessions under `conch supervise`, and answers
// tool calls. It never serves a network protocol itself; adapters (MCP,
// HTTP) translate to and from its methods. All methods are safe for
// concurrent use.
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/supervisor/proto"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host"
	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/host/shellenv"
	"github.com/conchsh/conch/internal/session/journal"
	"github.com/conchsh/conch/internal/session/registry"
	"github.com/conchsh/conch/internal/session/shim"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/store/approvals"
)

// Options configure an Engine. The zero value of every field but Home
// works.
type Options struct {
	// Home is the state directory. Required.
	Home string
	// Config is the configuration; nil loads Home/config.json.
	Config *config.Config
	// Workdir is the default workspace of every agent that has none
	// configured (conch mcp --workdir); default the process's cwd.
	Workdir string
	// SupervisorArgv is the command that runs a supervisor, to which
	// "--home H --session ID" is appended. Default: the words of
	// $CONCH_SUPERVISOR_LAUNCHER (a command that runs its arguments in the
	// same process, such as systemd-run --scope), then conch-shim
	// supervise (shim.Locate: the shim, else this executable). Set, it
	// also leaves sandbox-init to this executable.
	SupervisorArgv []string
	// Mode names the kind of process holding the engine ("mcp", "serve"),
	// shown to a second engine that finds the home locked.
	Mode string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Notify, if set, is called (without locks held) for every exec event
	// queued for an agent, so adapters can push it at once.
	Notify func(agent string, n apitype.Notice)
	// Workspace, if set, returns an agent's workspace (agents.json) when
	// the configuration names none.
	Workspace func(agent string) string
	// Events, if set, receives every engine event the SSE stream
	// /v1/events carries (session.*, exec.notice, approval.*), without locks held. It must not
	// block for long.
	Events func(Event)
	// PatchSandbox, if set, says where apply_patch applies for an agent
	// whose effective host is the sandbox: ok is false when sandboxing is
	// off for the agent (then the implicit default host falls back to the
	// gateway and an explicit sandbox host fails closed). Unset: sandboxing
	// is off.
	PatchSandbox func(agent string) (target PatchTarget, ok bool, err *apitype.Error)
	// PatchNode, if set, applies a patch on the agent's node through
	// system.patch.apply; the engine records the
	// ledger entry of a successful answer. Unset: no node host.
	PatchNode func(ctx context.Context, agent, input string) (NodePatch, *apitype.Error)
	// Nodes, if set, runs host=node calls on node hosts (the gateway's
	// node hub); nil means no node is available.
	Nodes Nodes
	// Probes answers the wait conditions port and http on this machine
	// (internal/adapter/waitprobe); nil: no port or http condition is ever met.
	Probes Probes
	// Hosts, if set, replace the registered hosts of the same names (or
	// add hosts): for tests and embedders (internal/host).
	Hosts []host.Host
	// Pods, if set, is the kubernetes sandbox backend (internal/host/kube);
	// nil: sandbox.backend kubernetes is unavailable.
	Pods host.PodSandboxes
}

// Event is an engine event for SSE subscribers. Agent is the owner of the
// session or approval ("" for operator-only events).
type Event struct {
	Type  string `json:"type"`
	Agent string `json:"agent,omitempty"`
	Data  any    `json:"data"`
}

func (e *Engine) emit(typ, agent string, data any) {
	if e.opt.Events != nil {
		e.opt.Events(Event{Type: typ, Agent: agent, Data: data})
	}
}

// ErrHomeNotWritable and ErrHomeLocked are returned by New; the CLI maps
// both to exit code 6.
var (
	ErrHomeNotWritable = errors.New("conch home is not writable")
	ErrHomeLocked      = errors.New("conch home is in use")
)

// homeError carries the full message of a home failure and unwraps to one
// of the sentinels above.
type homeError struct {
	kind error
	msg  string
}

func (e *homeError) Error() string { return e.msg }
func (e *homeError) Unwrap() error { return e.kind }

// Engine runs sessions in one home.
type Engine struct {
	opt     Options
	home    string
	cfgp    atomic.Pointer[config.Config] // the configuration; replaced by Reload
	log     *slog.Logger
	lock    *os.File
	cwd     string
	dirs    *registry.DirPool // session ids and reusable directories
	damage  damageLog
	supArgv []string
	shim    shim.Program // what runs supervise and sandbox-init

	// sessions is the session table (its own lock, a leaf: taken under
	// mu, never the other way round).
	sessions *registry.Table[*session]

	mu        sync.Mutex // guards notices, retaining and closed
	notices   map[string][]queuedNotice
	retaining map[string]bool // agents whose journal quota check runs
	closed    bool

	// retainMu serialises retain: two checks at once would both pick the
	// same oldest sessions, evicting (and announcing) each twice and
	// leaving the agent over its cap.
	retainMu sync.Mutex

	// pool starts the supervisors: the warm spare, or the shared
	// shared supervisors (internal/session/supervisor/pool.go).
	pool     *supervisor.Pool
	counters execCounters
	// idem holds the idempotency keys; set by New.
	idem *registry.IdemStore
	// admission holds quotas.maxRunning slots between admission and the
	// session's registration (quota.go).
	admission registry.Admission
	// login is the login-shell PATH probe of gateway runs (loginpath.go).
	loginOnce sync.Once
	login     atomic.Pointer[shellenv.LoginProbe]

	// The ledger writer: ledgerQ is fed under lmu (read side) until
	// ledgerClosed; ledgerDone closes when everything was written.
	lmu          sync.RWMutex
	ledgerQ      chan ledgerItem
	ledgerClosed bool
	ledgerDone   chan struct{}

	hosts *host.Registry   // where commands run (internal/host)
	store *approvals.Store // pending approvals
	limit registry.Limiter // exec rate limits
	disk  diskState        // the home's free space (disk.go)

	calls inflight // the calls in flight, for Stop (stop.go)

	wg     sync.WaitGroup // trackers and the sweeper
	stop   chan struct{}
	stopMu sync.Once
}

type queuedNotice struct {
	apitype.Notice
	sess *session
}

// New opens the home, takes its engine lock and reattaches its sessions.
func New(opt Options) (*Engine, error) {
	if opt.Home == "" {
		return nil, errors.New("engine: Home is required")
	}
	home, err := filepath.Abs(opt.Home)
	if err != nil {
		return nil, err
	}
	if err := prepareHome(home); err != nil {
		return nil, &homeError{ErrHomeNotWritable, fmt.Sprintf("conch home %s is not writable (%v)", home, err)}
	}
	lock, err := lockHome(home, opt.Mode)
	if err != nil {
		return nil, err
	}
	cfg := opt.Config
	if cfg == nil {
		cfg, err = config.Load(filepath.Join(home, "config.json"))
		if err != nil {
			lock.Close()
			return nil, err
		}
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cwd := opt.Workdir
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	argv := opt.SupervisorArgv
	var prog shim.Program
	var argvFunc func() []string
	initExe := func() string { return prog.Path }
	if len(argv) == 0 {
		prog = shim.Locate()
		launcher := strings.Fields(os.Getenv("CONCH_SUPERVISOR_LAUNCHER"))
		argv = append(launcher, prog.SuperviseArgv()...)
		// shim.Current: a shim built in the background takes over.
		argvFunc = func() []string { return append(slices.Clone(launcher), shim.Current().SuperviseArgv()...) }
		initExe = func() string { return shim.Current().Path }
	} else if exe, err := os.Executable(); err == nil {
		prog = shim.Program{Path: exe, From: shim.FromSelf}
	}
	e := &Engine{
		opt: opt, home: home, log: log, lock: lock, cwd: cwd, supArgv: argv, shim: prog, dirs: registry.NewDirPool(home),
		sessions: registry.NewTable[*session](), notices: map[string][]queuedNotice{}, stop: make(chan struct{}),
	}
	e.calls.init()
	e.cfgp.Store(cfg)
	e.hosts = host.NewRegistry(host.Deps{Home: home, Log: log, InitExe: initExe, LoginPATH: e.loginPATH, Launch: e.commit,
		Nodes: opt.Nodes, NodeBinding: e.NodeBinding, Pods: opt.Pods}, opt.Hosts...)
	if opt.Mode != "node" && gatewayLikely(cfg) {
		// Probe the login-shell PATH now, off the first exec's path.
		e.loginProbe()
	}
	e.loadIdem()
	e.startLedger()
	if e.store, err = approvals.OpenStore(home); err != nil {
		e.stopLedger()
		lock.Close()
		return nil, &homeError{ErrHomeNotWritable, fmt.Sprintf("conch home %s is not writable (%v)", home, err)}
	}
	e.reattach()
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.cleanRun() }()
	e.pool = supervisor.NewPool(supervisor.PoolConfig{
		Argv: e.supArgv, ArgvFunc: argvFunc, Home: home, Env: append(supervisorEnv(), shim.SuperviseEnv()), Shared: supervisor.DefaultShared(),
		MaxStarting: 2 * runtime.NumCPU(), SharedExited: e.sharedGone, Warn: e.log.Warn,
	})
	e.wg.Add(1)
	go e.sweep()
	return e, nil
}

// prepareHome creates the home and its subdirectories with mode 0700 and
// proves it is writable.
func prepareHome(home string) error {
	for _, d := range []string{home, filepath.Join(home, "sessions"), filepath.Join(home, "run"), filepath.Join(home, "run", "s")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := os.Chmod(home, 0o700); err != nil {
		return err
	}
	probe := filepath.Join(home, "run", ".probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		return err
	}
	return os.Remove(probe)
}

// lockHome takes run/engine.lock (flock) and records who holds it.
func lockHome(home, mode string) (*os.File, error) {
	path := filepath.Join(home, "run", "engine.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, &homeError{ErrHomeNotWritable, fmt.Sprintf("conch home %s is not writable (%v)", home, err)}
	}
	err = fsutil.TryLock(f, true)
	// A holder that was just killed keeps the lock until its last thread
	// has exited, a moment after it shows as dead: wait for that, but
	// never for a live holder.
	for deadline := time.Now().Add(3 * time.Second); err != nil && time.Now().Before(deadline); {
		b, _ := os.ReadFile(path)
		pid, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		if n, perr := strconv.Atoi(pid); perr != nil || processAlive(n) {
			break
		}
		time.Sleep(20 * time.Millisecond)
		err = fsutil.TryLock(f, true)
	}
	if err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		pid, who, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		if who == "" {
			who = "engine"
		}
		return nil, &homeError{ErrHomeLocked, fmt.Sprintf("conch home %s is in use by pid %s (%s); stop it or use another --home", home, pid, who)}
	}
	if mode == "" {
		mode = "engine"
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" "+mode+"\n"), 0)
	return f, nil
}

// processAlive reports whether pid runs and is not a zombie (its thread
// group leader exited), from the OS's process table (supervisor.Alive).
func processAlive(pid int) bool { return supervisor.Alive(pid, 0) }

// Config returns the engine's configuration.
func (e *Engine) Config() *config.Config { return e.conf() }

func (e *Engine) conf() *config.Config { return e.cfgp.Load() }

// Reload re-reads $CONCH_HOME/config.json. An invalid file keeps the old
// configuration and returns the error.
func (e *Engine) Reload() error {
	cfg, err := config.Load(filepath.Join(e.home, "config.json"))
	if err != nil {
		return err
	}
	e.cfgp.Store(cfg)
	return nil
}

// Home returns the engine's home directory.
func (e *Engine) Home() string { return e.home }

// Shim is the program that runs this engine's supervisors and sandbox
// inits (conch-shim, or this executable when none was found: its Note
// says why and the fix).
func (e *Engine) Shim() shim.Program {
	if len(e.opt.SupervisorArgv) == 0 {
		return shim.Current()
	}
	return e.shim
}

// Close stops the engine. It runs Stop first (for up to 5 s), so every
// call in flight has its answer. Sessions keep running under their
// supervisors unless sessions.survive is false, in which case each is
// killed with killedBy "shutdown" first. Close waits for the engine's
// goroutines.
func (e *Engine) Close() error {
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	e.Stop(sctx)
	cancel()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	// The spare exits; hosts take no more sessions and exit once theirs
	// have ended.
	e.pool.Close()
	if p := e.login.Load(); p != nil {
		p.Stop() // a probe still running does not outlive the engine
	}
	running := e.sessions.Select(startedRunning)
	e.mu.Unlock()
	if !e.conf().Survive() {
		e.killAll(running, proto.KilledByShutdown)
		// One deadline for all of them.
		deadline := time.After(e.conf().Exec("").KillGrace + 3*time.Second)
	wait:
		for _, s := range running {
			select {
			case <-s.ended:
			case <-deadline:
				break wait
			}
		}
	}
	e.stopMu.Do(func() { close(e.stop) })
	e.wg.Wait()
	e.pool.Wait()
	if len(running) == 0 || !e.conf().Survive() {
		// No session outlives the engine: its hosts are finishing
		// their last end states; let them go before the home is
		// released.
		e.pool.WaitShared(5 * time.Second)
	}
	e.stopLedger()
	return e.lock.Close()
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// socketPath returns the control socket path of a session: under the home
// when it fits in a sockaddr_un, else under a per-user runtime directory.
func (e *Engine) socketPath(id string) string {
	p := filepath.Join(e.home, "run", "s", id+".sock")
	if len(p) <= 100 {
		return p
	}
	return filepath.Join(e.fallbackSocketDir(), id+".sock")
}

// fallbackSocketDir is where sockets go whose path in the home would be
// too long.
func (e *Engine) fallbackSocketDir() string {
	return runtimeDir(runtime.GOOS, os.Getenv, os.Getuid(), shortHash(e.home))
}

// lookup returns the session id of agent, or nil: a session of another
// agent behaves exactly like a missing one.
func (e *Engine) lookup(agent, id string) *session {
	s, _ := e.sessions.Get(id)
	if s == nil || s.agent != agent {
		return nil
	}
	return s
}

func (e *Engine) forget(s *session) { e.sessions.Remove(s.id, s) }

// startedRunning selects the sessions whose command runs (not those
// waiting for an approval).
func startedRunning(s *session) bool { return s.running() && !s.pending() }

// track follows a running session's events until it ends. events comes
// from the spawn pipe or from a socket subscription; when it closes without
// an end state the supervisor is re-contacted, and declared lost when it
// is gone.
func (e *Engine) track(s *session, events <-chan proto.Event, closeEvents func()) {
	defer e.wg.Done()
	defer func() { closeEvents() }()
	var lastOutput time.Time
	// The journal quota is checked every 1/64 of quotas.journalBytes (at
	// least 1 MiB) of output, so running sessions that grow are trimmed
	// before the next session ends.
	var checked int64 = -1
	for {
	recv:
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					break recv
				}
				s.setCursor(ev.Cursor)
				if q := e.conf().Quota(s.agent); q.JournalBytes > 0 {
					if checked < 0 {
						checked = ev.Cursor
					}
					if ev.Cursor-checked >= max(1<<20, q.JournalBytes/64) {
						checked = ev.Cursor
						e.checkJournals(s.agent)
					}
				}
				if now := time.Now(); ev.Exit == nil && now.Sub(lastOutput) >= time.Second {
					lastOutput = now
					e.emit("session.output", s.agent, map[string]any{"sessionId": s.id, "cursor": ev.Cursor, "stream": "both"})
				}
				if ev.Exit != nil && ev.Exit.Final {
					e.ended(s, *ev.Exit)
					return
				}
			case <-e.stop:
				return
			}
		}
		if ex, ok, _ := e.readExit(s.dir); ok && ex.Final {
			e.ended(s, ex)
			return
		}
		select {
		case <-e.stop:
			return
		default:
		}
		closeEvents()
		next, closeNext, err := e.resubscribe(s)
		if err != nil {
			e.markLost(s)
			return
		}
		if next == nil {
			return // ended meanwhile
		}
		events, closeEvents = next, closeNext
	}
}

// resubscribe reconnects to a session's supervisor: three tries a second
// apart while its process is alive.
func (e *Engine) resubscribe(s *session) (<-chan proto.Event, func(), error) {
	s.mu.Lock()
	meta := s.meta
	s.mu.Unlock()
	var lastErr error
	for i := 0; i < 3; i++ {
		if !supervisor.Alive(meta.SupervisorPID, meta.SupervisorStartTime) {
			// A supervisor that just committed its end state and exited
			// is not lost.
			if ex, ok, _ := e.readExit(s.dir); ok && ex.Final {
				e.ended(s, ex)
				return nil, nil, nil
			}
			return nil, nil, errors.New("supervisor is gone")
		}
		ch, closeFn, err := supervisor.Subscribe(meta.Socket, meta.ID)
		if err == nil {
			return ch, closeFn, nil
		}
		lastErr = err
		// A host outlives the sessions it served: one that no longer
		// knows the session has committed its end state.
		if ex, ok, _ := e.readExit(s.dir); ok && ex.Final {
			e.ended(s, ex)
			return nil, nil, nil
		}
		select {
		case <-e.stop:
			return nil, nil, errors.New("engine stopping")
		case <-time.After(time.Second):
		}
	}
	return nil, nil, lastErr
}

// markLost records the end state "lost" for a session whose supervisor
// died without one, after killing whatever is left of its tree.
func (e *Engine) markLost(s *session) {
	if !s.running() || e.isClosed() {
		return
	}
	s.mu.Lock()
	meta := s.meta
	cursor := s.cursor
	s.mu.Unlock()
	if ex, ok, _ := e.readExit(s.dir); ok {
		// The supervisor died after reaping the command but before it
		// finished cleaning up: the recorded state is the truth.
		ex.Final = true
		ex.DescendantsKilled += supervisor.Sweep(meta)
		e.ended(s, e.recordExit(s, ex, false))
		return
	}
	n := supervisor.Sweep(meta)
	now := time.Now()
	ex := proto.Exit{
		State: proto.StateLost, EndedAt: now.UnixMilli(), DescendantsKilled: n,
		OutputBytes: cursor, Final: true,
		Reason: "Command lost: its supervisor ended without recording an exit status.",
	}
	if meta.StartedAt > 0 {
		ex.DurationMs = now.UnixMilli() - meta.StartedAt
	}
	e.ended(s, e.recordExit(s, ex, false))
}

// ended handles a session's end: it wakes waiters, deletes a foreground
// session nobody will read, and queues the exit notice.
func (e *Engine) ended(s *session, ex proto.Exit) {
	e.checkGuard(s)
	if !s.finish(ex) {
		return
	}
	st, _, _ := s.snapshot()
	if ex.State != proto.StateDenied {
		e.ledgerEnd(s, ex, st.Gated || st.ApprovalID != "")
		e.finishedNotice(s, ex)
	}
	e.emit("session.ended", s.agent, map[string]any{"sessionId": s.id, "state": ex.State, "exitCode": ex.ExitCode,
		"signal": ex.Signal, "killedBy": ex.KilledBy, "endedAt": ex.EndedAt})
	if st.Backgrounded || st.Retained {
		e.retainLater(s.agent)
	}
	if st.Hidden {
		// remove: deleted as soon as it ends.
		e.forget(s)
		e.removeSession(s)
		return
	}
	if !st.Backgrounded {
		return // the exec call in its yield window takes it from here
	}
	if ex.State == proto.StateDenied || st.Gated && st.ApprovalID != "" {
		// An approval-gated session's outcomes are told by its approval
		// events (denied, running, finished), never by an exit notice
		// as well: one notice per outcome.
		return
	}
	e.queueExitNotice(s, ex)
}

// checkGuard compares, once, the paths a sandboxed run's backend
// mounted read-only with their record from before the run; what changed
// is put back (sandbox.Guard) and the session's result and the log say
// so. The sandbox's processes are gone by now (its namespaces die with
// its init).
func (e *Engine) checkGuard(s *session) {
	s.mu.Lock()
	g := s.guard
	s.guard = nil
	s.mu.Unlock()
	if g == nil {
		return
	}
	q := filepath.Join(e.home, "sandboxes", "quarantine", s.id)
	cs := g.Check(q)
	if len(cs) == 0 {
		return
	}
	note := sandbox.ChangesNote(cs, q)
	e.log.Warn("sandbox: the command changed protected paths; conch put them back", "session", s.id, "agent", s.agent, "changes", len(cs), "note", note)
	s.update(func(st *state) { st.Restored = note })
}

// sweep deletes finished sessions past their TTL.
func (e *Engine) sweep() {
	defer e.wg.Done()
	// Every max(30 s, TTL/6) of the shortest TTL.
	every := max(30*time.Second, e.conf().Exec("").Cleanup/6)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		// Resolved approval records are kept 15 s for late readers.
		e.store.Prune(now.Add(-15 * time.Second))
		e.idem.Sweep(e.idemExpired(now))
		old := e.sessions.RemoveWhere(func(s *session) bool {
			_, ex, _ := s.snapshot()
			return ex != nil && now.Sub(time.UnixMilli(ex.EndedAt)) > e.conf().Exec(s.agent).Cleanup
		})
		for _, s := range old {
			e.removeSession(s)
		}
		e.cleanRun()
	}
}

// hasOutput reports whether the journal in dir holds a segment.
func hasOutput(dir string) bool {
	info, err := journal.Stat(dir)
	return err == nil && info.Segments > 0
}

// reattach loads every session of the home.
func (e *Engine) reattach() {
	// Hosts write late what their sessions owe (proto.Spec.State);
	// a host whose engine died may still be writing.
	supervisor.FlushShared(filepath.Join(e.home, "run", "s"), e.fallbackSocketDir())
	dir := filepath.Join(e.home, "sessions")
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if n.IsDir() {
			e.reattachOne(dir, n.Name())
		}
	}
}

// reattachOne takes up the session directory id of dir found at start:
// a pool directory is adopted, a session reserved by an approval is
// reloaded, one whose files say nothing ran is removed, one whose
// supervisor is gone is ended (lost, or with the end state it left),
// and a live one is followed again.
func (e *Engine) reattachOne(dir, id string) {
	sdir := filepath.Join(dir, id)
	if registry.IsReserved(id) {
		e.dirs.Adopt(dir, id)
		return
	}
	s := e.newSession(id, sdir, "")
	s.jdir = proto.JournalDir(sdir)
	// A supervisor that could not write meta.json (a full disk)
	// keeps it in memory and serves it.
	var live *proto.Meta
	if _, err := os.Stat(proto.MetaPath(sdir)); err != nil {
		if m, ok := supervisor.LiveMeta(id, e.socketPath(id), filepath.Join(e.home, "run", "s"), e.fallbackSocketDir()); ok {
			live = &m
		}
	}
	err := fsutil.ReadJSON(proto.StatePath(sdir), &s.st)
	if errors.Is(err, fsutil.ErrDamaged) {
		// Rebuilt from meta.json below; what only state.json knew
		// (drain cursors, retention flags) starts over.
		e.damaged("state", proto.StatePath(sdir), err, "rebuilt from meta.json")
		s.st = state{}
	}
	if err == nil && s.st.PendingApprovalID != "" && e.reattachReserved(s, sdir) {
		return
	}
	if err != nil {
		// No state: the engine died while creating it, or a host
		// died before it wrote the files it owed (FlushShared has
		// had the live ones write theirs). Nothing runs unless
		// meta.json exists; what a dead host left is ended.
		if _, err := os.Stat(proto.MetaPath(sdir)); err != nil && live == nil {
			supervisor.SweepSession(id)
			os.RemoveAll(sdir)
			return
		}
	}
	if live != nil {
		s.meta = *live
	} else if err := e.readMeta(id, sdir, &s.meta); err != nil {
		e.reattachWithoutMeta(s, sdir, err)
		return
	}
	e.restoreFromMeta(s)
	e.sessions.Put(id, s)
	if ex, ok, _ := e.readExit(sdir); ok && ex.Final {
		e.foundEnded(s, ex)
		if s.st.Hidden {
			e.sessions.Remove(id, s)
			os.RemoveAll(sdir)
		}
		return
	}
	e.followAgain(s)
}

// reattachReserved takes up a session reserved by an approval (no
// meta.json: nothing started); it reports false for one that started.
func (e *Engine) reattachReserved(s *session, sdir string) bool {
	if _, statErr := os.Stat(proto.MetaPath(sdir)); statErr == nil {
		return false
	}
	s.agent = s.st.Agent
	e.sessions.Put(s.id, s)
	if ex, ok, _ := e.readExit(sdir); ok {
		e.foundEnded(s, ex)
		return true
	}
	e.reloadPending(s)
	return true
}

// reattachWithoutMeta handles a session whose meta.json cannot be read
// (err). Nothing follows the session: whatever of it still runs in its
// cgroups is ended (a supervisor that answered would have given back
// the record).
func (e *Engine) reattachWithoutMeta(s *session, sdir string, err error) {
	supervisor.SweepSession(s.id)
	if !hasOutput(s.jdir) && errors.Is(err, os.ErrNotExist) && s.st.ApprovalID != "" && !s.st.LedgerExec {
		// An approved run whose engine died starting it: the agent
		// polls it for the outcome.
		s.agent = s.st.Agent
		e.sessions.Put(s.id, s)
		if ex, ok, _ := e.readExit(sdir); ok {
			e.foundEnded(s, ex)
		} else {
			e.lostBeforeStart(s)
		}
		return
	}
	if !hasOutput(s.jdir) && errors.Is(err, os.ErrNotExist) {
		// A supervisor that never started: nothing to follow.
		os.RemoveAll(sdir)
		return
	}
	// Output exists, or meta.json does but is damaged (a
	// machine crash tore it, or a disk fault): the command
	// started, so keep the session and report it lost.
	s.agent = s.st.Agent
	s.start = time.UnixMilli(s.st.CreatedAt)
	e.sessions.Put(s.id, s)
	if ex, ok, _ := e.readExit(sdir); ok {
		e.foundEnded(s, ex)
	} else {
		e.markLost(s)
	}
}

// restoreFromMeta fills in what a found session knows from its
// meta.json (a state.json that lost it is rebuilt from it) and its
// journal's end.
func (e *Engine) restoreFromMeta(s *session) {
	s.pid, s.socket = s.meta.PID, s.meta.Socket
	s.agent = s.st.Agent
	s.approvalID = s.st.ApprovalID
	s.start = time.UnixMilli(s.meta.StartedAt)
	if s.st.Agent == "" {
		s.agent = s.meta.Agent
		s.st.Agent = s.meta.Agent
		s.st.Command, s.st.Name, s.st.Cwd, s.st.Host, s.st.PTY = s.meta.Command, s.meta.Name, s.meta.Cwd, s.meta.Host, s.meta.PTY
	}
	// A foreground call cut by the restart: its session is now a
	// background one.
	if !s.st.Backgrounded && !s.st.Retained {
		s.st.Backgrounded = true
		s.saveLocked()
	}
	if info, err := journalEnd(s.journal()); err == nil {
		s.cursor = info
	}
}

// followAgain subscribes to a found session's supervisor and tracks it;
// a supervisor that does not answer makes the session lost.
func (e *Engine) followAgain(s *session) {
	ch, closeFn, err := e.resubscribe(s)
	if err != nil {
		e.markLost(s)
		return
	}
	if ch == nil {
		return // ended meanwhile
	}
	// A supervisor answers a subscription at once: an end state it
	// keeps in memory (exit.json could not be written: a full disk)
	// is known before the engine serves anything.
	select {
	case ev, ok := <-ch:
		if ok && ev.Exit != nil && ev.Exit.Final {
			closeFn()
			e.foundEnded(s, *ev.Exit)
			return
		}
		if ok {
			s.cursor = max(s.cursor, ev.Cursor)
		}
	case <-time.After(2 * time.Second):
	}
	e.wg.Add(1)
	go e.track(s, ch, closeFn)
}

// foundEnded records the end of a session the engine found ended at its
// start, and its ledger end record if no engine wrote it.
func (e *Engine) foundEnded(s *session, ex proto.Exit) {
	if s.finish(ex) {
		e.observedEnd(s, ex)
	}
}

// Sessions returns the ids of every session in the registry, sorted; for
// tests and diagnostics.
func (e *Engine) Sessions() []string { return e.sessions.IDs() }

// Call runs a tool by name with raw JSON arguments: the entry point of the
// adapters.
func (e *Engine) Call(ctx context.Context, agent, tool string, args json.RawMessage) (res apitype.Result) {
	defer func() { res = e.bound(agent, res) }()
	ctx, done, ok := e.calls.enter(ctx)
	defer done()
	if !ok {
		return stoppingResult(tool)
	}
	if !config.ValidAgent(agent) {
		return execError(apitype.Errorf(apitype.CodeInvalidArgument, "Invalid agent id %q: use [a-z0-9][a-z0-9_-]{0,63}.", agent))
	}
	if tool == "apply_patch" {
		if err := e.patchAllowed(agent); err != nil {
			return e.withNotices(agent, patchError(err))
		}
		p, perr := apitype.ParsePatchParams(args)
		if perr != nil {
			return e.withNotices(agent, patchError(perr))
		}
		return e.ApplyPatch(ctx, agent, p)
	}
	if e.conf().Denied(agent, tool) {
		return execError(apitype.Errorf("forbidden", "Tool %s is denied for agent %s (tools.deny).", tool, agent))
	}
	switch tool {
	case "exec":
		p, perr := apitype.ParseExecParams(args)
		if perr != nil {
			return e.withNotices(agent, execError(perr))
		}
		return e.Exec(ctx, agent, p)
	case "process":
		p, perr := apitype.ParseProcessParams(args)
		if perr != nil {
			return e.withNotices(agent, processError(perr))
		}
		return e.Process(ctx, agent, p)
	}
	return execError(apitype.Errorf(apitype.CodeInvalidArgument, "Unknown tool %q.", tool))
}

// shortHash is 8 hex digits of sha256(s), naming per-home runtime dirs.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// Changed returns a channel closed at the next change (new output, end) of
// agent's session id, or nil when there is no such session.
func (e *Engine) Changed(agent, id string) <-chan struct{} {
	s := e.lookup(agent, id)
	if s == nil {
		return nil
	}
	if st, _, _ := s.snapshot(); st.Hidden {
		return nil
	}
	return s.changed()
}

// execBuckets are the upper bounds (seconds) of the exec duration
// histogram.
var execBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// execCounters count exec calls for /metrics; guarded by Engine.mu.
type execCounters struct {
	total   map[[3]string]int64 // agent, host, status
	buckets []int64             // cumulative counts per execBuckets, +Inf last
	sum     float64
	count   int64
}

func (e *Engine) countExec(agent string, res apitype.Result, d time.Duration) {
	status, host := "error", ""
	switch det := res.Details.(type) {
	case *apitype.ExecDetails:
		status, host = det.Status, det.Host
	case *apitype.ApprovalDetails:
		status, host = det.Status, det.Host
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := &e.counters
	if c.total == nil {
		c.total = map[[3]string]int64{}
		c.buckets = make([]int64, len(execBuckets)+1)
	}
	c.total[[3]string{agent, host, status}]++
	secs := d.Seconds()
	for i, b := range execBuckets {
		if secs <= b {
			c.buckets[i]++
		}
	}
	c.buckets[len(execBuckets)]++
	c.sum += secs
	c.count++
}

// Stats are gauges and counters for /metrics.
type Stats struct {
	// ExecTotal counts exec calls by agent, host and status.
	ExecTotal map[[3]string]int64
	// ExecBuckets are the duration histogram's upper bounds in seconds and
	// ExecCounts its cumulative counts (the last one is +Inf).
	ExecBuckets []float64
	ExecCounts  []int64
	ExecSum     float64
	ExecCount   int64
	// Running counts running sessions by agent and host.
	Running map[[2]string]int
	// Pending counts sessions waiting for an approval.
	Pending int
	// Damaged counts the damaged state files found, by kind (damage.go).
	Damaged map[string]int64
	// WriteFailures counts the failed writes of session state files, by
	// file: exit, state, meta (damage.go).
	WriteFailures map[string]int64
}

// Stats returns the engine's current gauges.
func (e *Engine) Stats() Stats {
	ss := e.sessions.Select(nil)
	st := Stats{Running: map[[2]string]int{}, ExecTotal: map[[3]string]int64{}, ExecBuckets: execBuckets}
	e.mu.Lock()
	for k, v := range e.counters.total {
		st.ExecTotal[k] = v
	}
	st.ExecCounts = append([]int64(nil), e.counters.buckets...)
	st.ExecSum, st.ExecCount = e.counters.sum, e.counters.count
	e.mu.Unlock()
	_, st.Damaged = e.DamageCounts()
	st.WriteFailures = e.WriteFailures()
	for _, s := range ss {
		if s.pending() {
			st.Pending++
			continue
		}
		if s.running() {
			sn, _, _ := s.snapshot()
			st.Running[[2]string{s.agent, sn.Host}]++
		}
	}
	return st
}

// StopSessions kills every running session with killedBy "shutdown" and
// waits for them to end (conch serve --stop-sessions).
func (e *Engine) StopSessions() {
	running := e.sessions.Select(startedRunning)
	e.killAll(running, proto.KilledByShutdown)
	// One deadline for all of them (a session that does not end, e.g.
	// whose kill could not be delivered, must not add its own wait).
	grace := e.conf().Exec("").KillGrace
	for _, s := range running {
		grace = max(grace, e.conf().Exec(s.agent).KillGrace)
	}
	deadline := time.After(grace + 3*time.Second)
	for _, s := range running {
		select {
		case <-s.ended:
		case <-deadline:
			return
		}
	}
}
