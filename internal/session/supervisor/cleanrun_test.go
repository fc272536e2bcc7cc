package supervisor

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestCleanRun: only the files of dead supervisors go: a refused socket
// older than a minute, a dead shared supervisor's socket and its empty (or old) log;
// a listening socket, a just-bound one, a live shared supervisor's files and a dead
// shared supervisor's recent crash log stay.
func TestCleanRun(t *testing.T) {
	home := t.TempDir()
	sdir := filepath.Join(home, "run", "s")
	os.MkdirAll(sdir, 0o700)
	old := time.Now().Add(-2 * time.Minute)
	closed := func(name string, age time.Time) string {
		p := filepath.Join(sdir, name)
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		l.Close()
		os.Chtimes(p, age, age)
		return p
	}
	stale := closed("stale-id.sock", old)
	fresh := closed("fresh-id.sock", time.Now())
	livePath := filepath.Join(sdir, "live-id.sock")
	live, err := net.Listen("unix", livePath)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	os.Chtimes(livePath, old, old)

	dead := exec.Command("true")
	dead.Run()
	dpid, lpid := dead.Process.Pid, os.Getpid()
	file := func(name string, body string, age time.Time) string {
		p := filepath.Join(home, "run", name)
		os.WriteFile(p, []byte(body), 0o600)
		os.Chtimes(p, age, age)
		return p
	}
	deadSock := file(fmt.Sprintf("s/host-%d.sock", dpid), "", time.Now())
	liveSock := file(fmt.Sprintf("s/host-%d.sock", lpid), "", time.Now())
	deadLog := file(fmt.Sprintf("supervisor-host-%d.log", dpid), "", time.Now())
	liveLog := file(fmt.Sprintf("supervisor-host-%d.log", lpid), "", old)
	// A dead shared supervisor's crash report is kept a week.
	crash := file(fmt.Sprintf("supervisor-host-%d.log", dpid+1000000), "panic: …", time.Now())
	oldCrash := file(fmt.Sprintf("supervisor-host-%d.log", dpid+2000000), "panic: …", time.Now().Add(-8*24*time.Hour))

	removed := map[string]bool{}
	for _, p := range CleanRun(home, sdir) {
		removed[p] = true
	}
	for p, want := range map[string]bool{stale: true, fresh: false, livePath: false, deadSock: true, liveSock: false, deadLog: true, liveLog: false, crash: false, oldCrash: true} {
		_, err := os.Stat(p)
		if gone := os.IsNotExist(err); gone != want || removed[p] != want {
			t.Errorf("%s: removed %v (reported %v), want %v", filepath.Base(p), gone, removed[p], want)
		}
	}
}
