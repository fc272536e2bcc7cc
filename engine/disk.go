package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/supervisor"
)

// The home out of space is a state of its own: exec refuses new sessions
// with disk_full while the home's filesystem has less free space than its
// reserve (sessions.diskReserveBytes), or after a write of the engine
// failed with ENOSPC until a probe write succeeds again. Running sessions
// go on: their supervisors hold output back and keep end states in memory
// until they can be written (internal/supervisor). /v1/health and conch
// doctor show the condition.

// maxDefaultReserve caps the default reserve; a tenth of a small
// filesystem is used below that.
const maxDefaultReserve = 8 << 20

// minFreeInodes is the number of free inodes below which the home counts
// as full (a session takes a handful).
const minFreeInodes = 64

// DiskStatus is the home's free space as exec sees it.
type DiskStatus struct {
	Full         bool   `json:"full"`
	FreeBytes    int64  `json:"freeBytes"`
	ReserveBytes int64  `json:"reserveBytes"`
	FreeInodes   int64  `json:"freeInodes,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// diskState remembers a failed write until the space is back.
type diskState struct {
	mu sync.Mutex
	// failed is the last ENOSPC of a write in the home ("" when none
	// is outstanding); probed when it was last re-checked.
	failed string
	probed time.Time
}

// isNoSpace reports an out-of-space error (also a quota's; a supervisor's
// start failure matches it too, see supervisor.Launch).
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// noteWrite records a failed write in the home: an ENOSPC makes the home
// full until space returns.
func (e *Engine) noteWrite(err error) {
	if !isNoSpace(err) {
		return
	}
	e.disk.mu.Lock()
	e.disk.failed = err.Error()
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

// homeSpace measures the filesystem of home against cfg's reserve.
func homeSpace(home string, cfg *config.Config) DiskStatus {
	var st syscall.Statfs_t
	if err := syscall.Statfs(home, &st); err != nil {
		return DiskStatus{}
	}
	d := DiskStatus{
		FreeBytes:    int64(st.Bavail) * int64(st.Bsize),
		ReserveBytes: reserve(cfg, int64(st.Blocks)*int64(st.Bsize)),
		FreeInodes:   int64(st.Ffree),
	}
	switch {
	case d.FreeBytes < d.ReserveBytes || d.FreeBytes == 0:
		d.Full = true
		d.Reason = fmt.Sprintf("%s free on the filesystem of %s, below the reserve of %s", sizeText(d.FreeBytes), home, sizeText(d.ReserveBytes))
	case st.Files > 0 && st.Ffree < minFreeInodes:
		d.Full = true
		d.Reason = fmt.Sprintf("%d free inodes on the filesystem of %s", st.Ffree, home)
	}
	return d
}

// DiskStatus returns the home's space state: measured, and full while a
// failed write has not been followed by a successful probe (at most one
// probe a second).
func (e *Engine) DiskStatus() DiskStatus {
	d := homeSpace(e.home, e.conf())
	e.disk.mu.Lock()
	defer e.disk.mu.Unlock()
	if e.disk.failed == "" {
		return d
	}
	if !d.Full && time.Since(e.disk.probed) >= time.Second {
		e.disk.probed = time.Now()
		if err := probeWrite(e.home); err == nil {
			e.disk.failed = ""
			return d
		}
	}
	if !d.Full {
		d.Full = true
		d.Reason = "a write in " + e.home + " failed: " + e.disk.failed
	}
	return d
}

// probeWrite writes and removes a small file in home.
func probeWrite(home string) error {
	p := filepath.Join(home, ".space-probe")
	err := os.WriteFile(p, make([]byte, 64<<10), 0o600)
	os.Remove(p)
	return err
}

// diskFull returns the disk_full error for exec, or nil when the home has
// room.
func (e *Engine) diskFull() *apitype.Error {
	d := e.DiskStatus()
	if !d.Full {
		return nil
	}
	return diskFullError(d.Reason)
}

func diskFullError(reason string) *apitype.Error {
	return apitype.Errorf(apitype.CodeDiskFull, "The conch home is out of disk space (%s): no new command is started until space is freed. Running sessions go on; output they cannot record yet is held back.", reason)
}

// lostNote is the sentence an end result carries when output of the
// session is gone for good ("" when none is).
func lostNote(ex supervisor.Exit) string {
	var parts []string
	if ex.DroppedBytes > 0 {
		parts = append(parts, fmt.Sprintf("%d bytes of output were dropped by the journal cap (journalMaxBytes) and are gone for good", ex.DroppedBytes))
	}
	if ex.UnrecordedBytes > 0 {
		parts = append(parts, fmt.Sprintf("%d bytes of output could not be recorded because the conch home is out of disk space and are gone for good", ex.UnrecordedBytes))
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
