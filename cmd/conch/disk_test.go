package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFullDiskHoldsOutput runs a command whose output does not fit on the
// home's filesystem: the supervisor holds the output back (the command
// blocks on it), poll says why, and once space is freed every line is in
// the journal. It needs to mount a small tmpfs (root).
func TestFullDiskHoldsOutput(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=6m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs for a full disk (needs root): %v %s", err, out)
	}
	// Cleanups run last-in first-out: the mount goes after conch and its
	// sessions.
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o700)
	t.Cleanup(func() { killLeftovers(t, home) })
	c := startConch(t, home)
	// Leave about 1 MiB: the 3 MB of output cannot all be journaled.
	filler := filepath.Join(dir, "filler")
	var st syscall.Statfs_t
	syscall.Statfs(dir, &st)
	free := int64(st.Bavail) * st.Bsize
	if err := os.WriteFile(filler, make([]byte, free-1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.exec(map[string]any{"command": "i=0; while [ $i -lt 30000 ]; do echo line-$i-0123456789012345678901234567890123456789012345678901234567890123456789012345678; i=$((i+1)); done; echo END-OF-OUTPUT", "background": true})
	id := r.str("sessionId")
	eventually(t, 30*time.Second, func() string {
		p := c.process(map[string]any{"action": "poll", "sessionId": id})
		if !strings.Contains(p.Text, "output is held back") || !strings.Contains(p.Text, "no space left on device") {
			return "no held-back warning yet: " + p.Text[max(0, len(p.Text)-300):]
		}
		if p.str("status") != "running" {
			return "the session ended while its output was held back"
		}
		return ""
	})
	os.Remove(filler)
	p := c.waitEnd(id, 60*time.Second)
	if p.num("exitCode") != 0 || strings.Contains(p.Text, "held back") {
		t.Fatalf("after space was freed: %q %v", p.Text[max(0, len(p.Text)-300):], p.D)
	}
	l := c.process(map[string]any{"action": "log", "sessionId": id, "offset": 0, "limit": 1})
	if l.num("totalLines") != 30001 {
		t.Fatalf("journal has %v lines, want 30001", l.D["totalLines"])
	}
	tail := c.process(map[string]any{"action": "log", "sessionId": id, "limit": 1})
	if tail.Text != "END-OF-OUTPUT" {
		t.Fatalf("last line %q", tail.Text)
	}
}
