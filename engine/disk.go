package engine

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

// The home out of space is a state of its own: exec refuses new sessions
// with disk_full while the home's filesystem has less free space than its
// reserve (sessions.diskReserveBytes), or after a write of the engine
// failed with ENOSPC until a probe write succeeds again. Running sessions
// go on: their supervisors hold output back and keep end states in memory
// until they can be written (internal/session/supervisor). /v1/health and conch
// doctor show the condition.
//
// A home that cannot be written for another reason (mounted read-only, an
// I/O error, permissions changed under conch) is the sibling state
// home_unwritable, with the same refusal and the same recovery probe:
// writeClass sorts every failed write into one of the two (or neither).

// maxDefaultReserve caps the default reserve; a tenth of a small
// filesystem is used below that.
const maxDefaultReserve = 8 << 20

// minFreeInodes is the number of free inodes below which the home counts
// as full (a session takes a handful).
const minFreeInodes = 64

// setDisk records the refusal code and reason in d, with the flag that
// goes with the code.
func setDisk(d *apitype.DiskStatus, code, reason string) {
	d.Code, d.Reason = code, reason
	d.Full = code == apitype.CodeDiskFull
	d.Unwritable = code == apitype.CodeHomeUnwritable
}

// diskState remembers a failed write until a probe write succeeds.
type diskState struct {
	mu sync.Mutex
	// failed is the last failed write in the home ("" when none is
	// outstanding), code its class (writeClass); probed when it was
	// last re-checked.
	failed string
	code   string
	probed time.Time
}

// writeErrnos sorts the errors of a write in the home into the states they
// put it in: out of space, or not writable at all. Any other error is the
// write's own (a bad path, a closed file) and no state of the home.
var writeErrnos = map[syscall.Errno]string{
	syscall.ENOSPC: apitype.CodeDiskFull,
	syscall.EDQUOT: apitype.CodeDiskFull,
	syscall.EROFS:  apitype.CodeHomeUnwritable,
	syscall.EIO:    apitype.CodeHomeUnwritable,
	syscall.EACCES: apitype.CodeHomeUnwritable,
	syscall.EPERM:  apitype.CodeHomeUnwritable,
}

// writeClass returns the state a failed write puts the home in:
// apitype.CodeDiskFull, apitype.CodeHomeUnwritable, or "" for none. A
// supervisor's start failure on a full disk matches ENOSPC (see
// supervisor.Launch).
func writeClass(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	return writeErrnos[errno]
}

// noteWrite records a failed write in the home. An out-of-space error
// makes the home full until a probe write succeeds; an error of the
// home_unwritable class does so only if a probe write fails too, since
// the same errnos (EACCES, EPERM) also come from things that are not the
// home (a supervisor binary that cannot be run, a sandbox refused).
func (e *Engine) noteWrite(err error) {
	code := writeClass(err)
	if code == apitype.CodeHomeUnwritable {
		perr := probeWrite(e.home)
		if perr == nil {
			return
		}
		err, code = perr, writeClass(perr)
	}
	if code == "" {
		return
	}
	e.disk.mu.Lock()
	e.disk.failed, e.disk.code = err.Error(), code
	e.disk.probed = time.Now()
	e.disk.mu.Unlock()
}

// reserve returns the configured reserve, or the default for a
// filesystem of total bytes.
func reserve(cfg *config.Config, total int64) int64 {
	if r := cfg.Sessions.DiskReserveBytes; r != nil {
		return max(*r, 0)
	}
	return min(total/10, maxDefaultReserve)
}

// fsInfo is what homeSpace needs to know of a file system (statFS):
// bytes free to us and in all, inodes (0 where there are none to count)
// and free inodes, and whether it is mounted read-only.
type fsInfo struct {
	freeBytes, totalBytes int64
	inodes, freeInodes    int64
	readOnly              bool
}

// homeSpace measures the filesystem of home: mounted read-only, or free
// space below cfg's reserve.
func homeSpace(home string, cfg *config.Config) apitype.DiskStatus {
	st, err := statFS(home)
	if err != nil {
		return apitype.DiskStatus{}
	}
	d := apitype.DiskStatus{
		FreeBytes:    st.freeBytes,
		ReserveBytes: reserve(cfg, st.totalBytes),
		FreeInodes:   st.freeInodes,
	}
	switch {
	case st.readOnly:
		setDisk(&d, apitype.CodeHomeUnwritable, fmt.Sprintf("the filesystem of %s is mounted read-only", home))
	case d.FreeBytes < d.ReserveBytes || d.FreeBytes == 0:
		setDisk(&d, apitype.CodeDiskFull, fmt.Sprintf("%s free on the filesystem of %s, below the reserve of %s", sizeText(d.FreeBytes), home, sizeText(d.ReserveBytes)))
	case st.inodes > 0 && st.freeInodes < minFreeInodes:
		setDisk(&d, apitype.CodeDiskFull, fmt.Sprintf("%d free inodes on the filesystem of %s", st.freeInodes, home))
	}
	return d
}

// homeCheck is homeSpace and a probe write, for conch doctor: it finds
// a home that cannot be written even where the filesystem looks fine
// (permissions, an I/O error).
func homeCheck(home string, cfg *config.Config) apitype.DiskStatus {
	d := homeSpace(home, cfg)
	if d.Refusing() {
		return d
	}
	if err := probeWrite(home); err != nil {
		if code := writeClass(err); code != "" {
			setDisk(&d, code, "a write in "+home+" failed: "+err.Error())
		}
	}
	return d
}

// idleProbe is how often DiskStatus probes a home that no failed write
// has marked, when asked: a filesystem the kernel turned read-only after
// an error need not show it in statfs, and an idle gateway writes nothing
// that would find out.
const idleProbe = 5 * time.Second

// DiskStatus returns the home's state: measured, and refusing while a
// failed write (or probe) has not been followed by a successful probe (at
// most one probe a second; one every idleProbe while nothing failed).
func (e *Engine) DiskStatus() apitype.DiskStatus {
	d := homeSpace(e.home, e.conf())
	e.disk.mu.Lock()
	defer e.disk.mu.Unlock()
	if e.disk.failed == "" && (d.Refusing() || time.Since(e.disk.probed) < idleProbe) {
		return d
	}
	if !d.Refusing() && time.Since(e.disk.probed) >= time.Second {
		e.disk.probed = time.Now()
		err := probeWrite(e.home)
		if err == nil {
			e.disk.failed, e.disk.code = "", ""
			return d
		}
		if code := writeClass(err); code != "" {
			e.disk.failed, e.disk.code = err.Error(), code
		}
	}
	if !d.Refusing() && e.disk.failed != "" {
		setDisk(&d, e.disk.code, "a write in "+e.home+" failed: "+e.disk.failed)
	}
	return d
}

// probeWrite writes and removes a small file in home (a file of its own,
// so that doctor and a gateway can probe at once).
func probeWrite(home string) error {
	f, err := os.CreateTemp(home, ".space-probe-*")
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, 64<<10))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	os.Remove(f.Name())
	return err
}

// homeRefusal returns the error exec refuses new sessions with while the
// home is full or cannot be written, or nil.
func (e *Engine) homeRefusal() *apitype.Error {
	d := e.DiskStatus()
	if !d.Refusing() {
		return nil
	}
	return refusalError(d.Code, d.Reason)
}

// refusalError is the error of code (a writeClass) for reason.
func refusalError(code, reason string) *apitype.Error {
	if code == apitype.CodeHomeUnwritable {
		return apitype.Errorf(apitype.CodeHomeUnwritable, "The conch home cannot be written (%s): no new command is started until a write succeeds again. Running sessions go on; output they cannot record yet is held back.", reason)
	}
	return apitype.Errorf(apitype.CodeDiskFull, "The conch home is out of disk space (%s): no new command is started until space is freed. Running sessions go on; output they cannot record yet is held back.", reason)
}

// lostNote is the sentence an end result carries when something of the
// session is gone for good: output, or the record of its end ("" when
// nothing is).
func lostNote(ex proto.Exit) string {
	var parts []string
	if ex.DroppedBytes > 0 {
		parts = append(parts, fmt.Sprintf("%d bytes of output were dropped by the journal cap (journalMaxBytes) and are gone for good", ex.DroppedBytes))
	}
	if ex.UnrecordedBytes > 0 {
		parts = append(parts, fmt.Sprintf("%d bytes of output could not be recorded because the conch home is out of disk space or cannot be written and are gone for good", ex.UnrecordedBytes))
	}
	if ex.NotRecorded != "" {
		parts = append(parts, "this end state could not be recorded on disk ("+ex.NotRecorded+"): a restarted gateway will not know it")
	}
	if len(parts) == 0 {
		return limitNote(ex.LimitHits)
	}
	return "\n\n(Warning: " + strings.Join(parts, "; ") + ".)" + limitNote(ex.LimitHits)
}

// limitNote says what the session's limits did to processes of a command
// that they did not end (supervisor.LimitHits): a child the OOM killer
// ended while the command went on, forks the task limit refused. "" when
// nothing.
func limitNote(h *proto.LimitHits) string {
	if h == nil {
		return ""
	}
	var parts []string
	if h.OOMKills > 0 {
		what := fmt.Sprintf("the kernel's OOM killer killed %d process(es) of this command", h.OOMKills)
		if h.MemoryBytes > 0 {
			what += fmt.Sprintf(" at the session's memory limit (%s, quotas.session.memoryBytes)", sizeText(int64(h.MemoryBytes)))
		}
		parts = append(parts, what+"; the command went on without them")
	}
	if h.PidsRefused > 0 {
		what := fmt.Sprintf("%d process or thread creation(s) failed at the session's task limit", h.PidsRefused)
		if h.Pids > 0 {
			what += fmt.Sprintf(" (%d, quotas.session.pids)", int64(h.Pids))
		}
		parts = append(parts, what+": a program saw fork fail (Resource temporarily unavailable)")
	}
	if len(parts) == 0 {
		return ""
	}
	return "\n\n(Warning: " + strings.Join(parts, "; ") + ".)"
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
