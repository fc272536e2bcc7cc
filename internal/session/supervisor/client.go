package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrUnreachable is returned when a supervisor's control socket cannot be
// reached.
var ErrUnreachable = errors.New("supervisor unreachable")

// ErrGone and ErrNoReport are wrapped by a commit's error when the
// supervisor could not take the spec, or ended without reporting.
var (
	ErrGone     = errors.New("supervisor is gone")
	ErrNoReport = errors.New("supervisor ended before reporting")
)

// Spare is a supervisor process started ahead of need: it has paid the
// process start-up cost and waits for a spec on fd 3. Commit hands it one;
// Close makes it exit unused.
type Spare struct {
	cmd    *exec.Cmd
	specW  *os.File
	readyR *os.File
}

// StartSpare starts `argv... --home home` as a supervisor in its own
// session, with stdio on /dev/null and env as its environment. The process
// is reaped in the background.
func StartSpare(argv []string, home string, env []string) (*Spare, error) {
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, err
	}
	args := append(append([]string{}, argv[1:]...), "--home", home)
	cmd := exec.Command(argv[0], args...)
	cmd.Env = env
	passPipes(cmd, specR, readyW)
	err = cmd.Start()
	specR.Close()
	readyW.Close()
	if err != nil {
		specW.Close()
		readyR.Close()
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	go cmd.Wait()
	return &Spare{cmd: cmd, specW: specW, readyR: readyR}, nil
}

// Close lets an unused spare exit.
func (sp *Spare) Close() {
	sp.specW.Close()
	sp.readyR.Close()
}

// Commit gives the spare its session and waits up to readyTimeout for its
// report. A supervisor that does not report in time is killed. The spare
// cannot be used again, whatever the outcome.
func (sp *Spare) Commit(spec proto.Spec, readyTimeout time.Duration) (*proto.Handle, error) {
	b, err := encodeSpec(spec)
	if err != nil {
		sp.Close()
		return nil, err
	}
	h, err := commit(sp.readyR, writeSpec(sp.specW, b), readyTimeout, func() { sp.cmd.Process.Kill() })
	if err != nil {
		return nil, err
	}
	h.SupervisorPID = sp.cmd.Process.Pid
	return h, nil
}

// encodeSpec is spec as sent to a supervisor: one line of JSON.
func encodeSpec(spec proto.Spec) ([]byte, error) {
	spec.V = proto.ProtocolVersion
	b, err := json.Marshal(spec)
	return append(b, '\n'), err
}

// writeSpec writes b on specW (and closes it) while the supervisor reads
// it, and reports how that went on the returned channel.
func writeSpec(specW *os.File, b []byte) <-chan error {
	wrote := make(chan error, 1)
	go func() {
		_, err := specW.Write(b)
		specW.Close()
		wrote <- err
	}()
	return wrote
}

// ErrReportTimeout marks a start whose supervisor did not report within
// the ready timeout (a single supervisor is then killed; a shared supervisor is
// retired and will not start the command: Spec.StartBy).
var ErrReportTimeout = errors.New("no start report in time")

// reportTimeout is the error of a start whose report did not come.
type reportTimeout struct{ d time.Duration }

func (e reportTimeout) Error() string        { return fmt.Sprintf("supervisor did not report within %v", e.d) }
func (e reportTimeout) Is(target error) bool { return target == ErrReportTimeout }

// commit reads the ready report on readyR, which then carries the
// session's events. wrote reports how sending the spec went. kill is
// called when no report comes within readyTimeout.
func commit(readyR *os.File, wrote <-chan error, readyTimeout time.Duration, kill func()) (*proto.Handle, error) {
	// A pipe from os.Pipe takes deadlines: no goroutine waits for the
	// report.
	readyR.SetReadDeadline(time.Now().Add(readyTimeout))
	br := bufio.NewReader(readyR)
	line, err := br.ReadBytes('\n')
	if errors.Is(err, os.ErrDeadlineExceeded) {
		kill()
		readyR.Close()
		return nil, reportTimeout{readyTimeout}
	}
	readyR.SetReadDeadline(time.Time{})
	var r ready
	if err == nil {
		err = json.Unmarshal(line, &r)
	}
	if werr := <-wrote; err != nil && werr != nil {
		readyR.Close()
		return nil, fmt.Errorf("%w: %w", ErrGone, werr)
	}
	if err != nil {
		readyR.Close()
		return nil, fmt.Errorf("%w: %w", ErrNoReport, err)
	}
	if !r.OK {
		readyR.Close()
		return nil, reportError(r)
	}
	events := make(chan proto.Event, 16)
	go decodeEvents(br, readyR, events)
	return &proto.Handle{PID: r.PID, Socket: r.Socket, Events: events, Close: func() { readyR.Close() }, Warnings: r.Warnings, Meta: r.Meta}, nil
}

// Launch starts a supervisor for spec and waits for its report: StartSpare
// followed by Commit.
func Launch(argv []string, home string, spec proto.Spec, env []string, readyTimeout time.Duration) (*proto.Handle, error) {
	sp, err := StartSpare(argv, home, env)
	if err != nil {
		return nil, err
	}
	return sp.Commit(spec, readyTimeout)
}

func decodeEvents(r *bufio.Reader, c interface{ Close() error }, out chan<- proto.Event) {
	defer close(out)
	defer c.Close()
	dec := json.NewDecoder(r)
	for {
		var ev proto.Event
		if err := dec.Decode(&ev); err != nil {
			return
		}
		out <- ev
		if ev.Exit != nil {
			return
		}
	}
}

// ErrNotResponding is wrapped by a control request's error when the
// supervisor took the connection but did not answer in time: it is
// stopped (SIGSTOP), wedged or starved. Unlike ErrUnreachable it says
// nothing about whether the supervisor lives; the request may still be
// carried out when it runs again.
var ErrNotResponding = errors.New("supervisor not responding")

// ReplyTimeout bounds a control request (Call): a live supervisor answers
// in milliseconds, also on a loaded machine; one that does not within this
// is stopped, wedged or starved, and the caller is told so instead of
// waiting. A write is given writeDeadline more, the time a supervisor
// waits for room in the command's input.
const ReplyTimeout = 3 * time.Second

// replyTimeout is how long Call waits for the answer to op.
func replyTimeout(op string) time.Duration {
	switch op {
	case "write", "closeStdin":
		return writeDeadline + ReplyTimeout
	}
	return ReplyTimeout
}

// Call sends one request to the supervisor listening on socket and returns
// its reply, waiting at most ReplyTimeout for it (a write longer: see
// replyTimeout). A reply with OK false is returned as an error.
func Call(socket string, req proto.Request) (proto.Reply, error) {
	return CallWithin(socket, req, replyTimeout(req.Op))
}

// CallWithin is Call waiting at most d (at most Call's own bound) for the
// connection and the reply: a caller with a deadline of its own passes
// what is left of it. A supervisor that takes the connection and does not
// answer in time gives an error wrapping ErrNotResponding.
func CallWithin(socket string, req proto.Request, d time.Duration) (proto.Reply, error) {
	d = min(max(d, time.Millisecond), replyTimeout(req.Op))
	deadline := time.Now().Add(d)
	c, err := net.DialTimeout("unix", socket, min(d, 2*time.Second))
	if err != nil {
		return proto.Reply{}, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer c.Close()
	c.SetDeadline(deadline)
	req.V = proto.ProtocolVersion
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return proto.Reply{}, callError(err, d)
	}
	var rep proto.Reply
	if err := json.NewDecoder(c).Decode(&rep); err != nil {
		return proto.Reply{}, callError(err, d)
	}
	if !rep.OK && rep.Error == errNoSession {
		// A shared supervisor whose session has ended: as a single supervisor's
		// socket that is gone.
		return rep, fmt.Errorf("%w: %s", ErrUnreachable, rep.Error)
	}
	if !rep.OK {
		return rep, errors.New(rep.Error)
	}
	return rep, nil
}

// callError classifies a failed request on a connected socket: no answer
// within d is ErrNotResponding, anything else (the supervisor closed the
// connection: it exited) ErrUnreachable.
func callError(err error, d time.Duration) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w (no answer within %v: stopped, wedged or overloaded)", ErrNotResponding, d)
	}
	return fmt.Errorf("%w: %v", ErrUnreachable, err)
}

// FlushShared asks every shared supervisor whose socket is in one of dirs to
// write the files its sessions owe (meta.json, state.json; see
// Spec.State), so that what an engine reads next is complete. A shared supervisor that
// cannot be reached is skipped: it is gone or about to be, and it wrote
// everything when its engine went.
func FlushShared(dirs ...string) {
	var socks []string
	for _, d := range dirs {
		m, _ := filepath.Glob(filepath.Join(d, "host-*.sock"))
		socks = append(socks, m...)
	}
	var wg sync.WaitGroup
	for _, sock := range socks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			Call(sock, proto.Request{Op: "flush"})
		}()
	}
	wg.Wait()
}

// LiveMeta asks the supervisors behind sockets (a session's own socket,
// and the shared supervisor sockets in hostDirs) for session id's meta.json as they keep
// it in memory: a supervisor that could not write the file (a full disk)
// still serves its session.
func LiveMeta(id, socket string, hostDirs ...string) (proto.Meta, bool) {
	socks := []string{socket}
	for _, d := range hostDirs {
		m, _ := filepath.Glob(filepath.Join(d, "host-*.sock"))
		socks = append(socks, m...)
	}
	for _, sock := range socks {
		if rep, err := Call(sock, proto.Request{Op: "meta", Session: id}); err == nil && rep.Meta != nil && rep.Meta.ID == id {
			return *rep.Meta, true
		}
	}
	return proto.Meta{}, false
}

// Subscribe connects to a supervisor and returns its event stream, closed
// when the supervisor ends (after the final event) or dies.
func Subscribe(socket, session string) (<-chan proto.Event, func(), error) {
	c, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	if err := json.NewEncoder(c).Encode(proto.Request{V: proto.ProtocolVersion, Op: "subscribe", Session: session}); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := br.ReadBytes('\n')
	c.SetReadDeadline(time.Time{})
	var rep proto.Reply
	if err == nil {
		err = json.Unmarshal(line, &rep)
	}
	if err != nil || !rep.OK {
		c.Close()
		return nil, nil, fmt.Errorf("%w: subscribe: %v %s", ErrUnreachable, err, rep.Error)
	}
	out := make(chan proto.Event, 16)
	go decodeEvents(br, c, out)
	return out, func() { c.Close() }, nil
}

// StaleLogAge is how long CleanRun keeps a non-empty log of a dead
// shared supervisor, which may hold its crash report.
const StaleLogAge = 7 * 24 * time.Hour

// staleSocketAge is how old a socket nobody listens on must be before
// CleanRun removes it: a supervisor starting now has bound its socket but
// may not listen on it yet.
const staleSocketAge = time.Minute

// CleanRun removes what dead supervisors left in the socket directories
// dirs (home/run/s and the fallback directory) and in home/run: the socket
// of a shared supervisor whose process is gone (host-<pid>.sock), a session's socket
// nobody has listened on for a minute (a connect is refused), and the log
// of a shared supervisor whose process is gone when it is empty or older than
// StaleLogAge. It returns the paths it removed.
func CleanRun(home string, dirs ...string) []string {
	var removed []string
	dead := func(pid string) bool {
		n, err := strconv.Atoi(pid)
		return err == nil && n > 0 && pidGone(n)
	}
	for _, d := range dirs {
		socks, _ := filepath.Glob(filepath.Join(d, "*.sock"))
		for _, sock := range socks {
			name := strings.TrimSuffix(filepath.Base(sock), ".sock")
			if pid, ok := strings.CutPrefix(name, "host-"); ok {
				if dead(pid) && os.Remove(sock) == nil {
					removed = append(removed, sock)
				}
				continue
			}
			fi, err := os.Lstat(sock)
			if err != nil || time.Since(fi.ModTime()) < staleSocketAge {
				continue
			}
			c, err := net.DialTimeout("unix", sock, 2*time.Second)
			if err == nil {
				c.Close()
				continue
			}
			if isRefused(err) && os.Remove(sock) == nil {
				removed = append(removed, sock)
			}
		}
	}
	logs, _ := filepath.Glob(filepath.Join(home, "run", "supervisor-host-*.log"))
	for _, l := range logs {
		if !dead(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(l), "supervisor-host-"), ".log")) {
			continue
		}
		fi, err := os.Stat(l)
		if err != nil || fi.Size() > 0 && time.Since(fi.ModTime()) < StaleLogAge {
			continue
		}
		if os.Remove(l) == nil {
			removed = append(removed, l)
		}
	}
	return removed
}
