package state

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/testkit/e2etest"
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
	t.Cleanup(func() { e2etest.KillLeftovers(t, home) })
	c := e2etest.StartConch(t, home)
	// Leave about 1 MiB: the 3 MB of output cannot all be journaled.
	filler := filepath.Join(dir, "filler")
	var st syscall.Statfs_t
	syscall.Statfs(dir, &st)
	free := int64(st.Bavail) * int64(st.Bsize)
	if err := os.WriteFile(filler, make([]byte, free-1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.Exec(map[string]any{"command": "i=0; while [ $i -lt 30000 ]; do echo line-$i-0123456789012345678901234567890123456789012345678901234567890123456789012345678; i=$((i+1)); done; echo END-OF-OUTPUT", "background": true})
	id := r.Str("sessionId")
	e2etest.Eventually(t, 30*time.Second, func() string {
		p := c.Process(map[string]any{"action": "poll", "sessionId": id})
		if !strings.Contains(p.Text, "output is held back") || !strings.Contains(p.Text, "no space left on device") {
			return "no held-back warning yet: " + p.Text[max(0, len(p.Text)-300):]
		}
		if p.Str("status") != "running" {
			return "the session ended while its output was held back"
		}
		return ""
	})
	os.Remove(filler)
	p := c.WaitEnd(id, 60*time.Second)
	if p.Num("exitCode") != 0 || strings.Contains(p.Text, "held back") {
		t.Fatalf("after space was freed: %q %v", p.Text[max(0, len(p.Text)-300):], p.D)
	}
	l := c.Process(map[string]any{"action": "log", "sessionId": id, "offset": 0, "limit": 1})
	if l.Num("totalLines") != 30001 {
		t.Fatalf("journal has %v lines, want 30001", l.D["totalLines"])
	}
	tail := c.Process(map[string]any{"action": "log", "sessionId": id, "limit": 1})
	if tail.Text != "END-OF-OUTPUT" {
		t.Fatalf("last line %q", tail.Text)
	}
}

// smallDisk mounts a tmpfs of size (e.g. "20m") on a fresh directory and
// returns it; the test is skipped where mounting is not permitted. The
// mount goes after everything the test registers later.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs for a full disk (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fillDisk writes a file that leaves about leave bytes free on dir's
// filesystem and returns its path.
func fillDisk(t *testing.T, dir string, leave int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := free - leave; n > 0 {
		// A short write is the disk being full already: that is the goal.
		f.Write(make([]byte, n))
	}
	return p
}

// TestDiskFullIsAState fills the home's disk under a gateway running two
// commands that print 100 MB each: exec refuses new sessions with
// disk_full at once (it used to accept them and answer "still running"),
// /v1/health and doctor say so, a kill reports within seconds and says
// what output is lost (it took 68 s), the killed session's end state,
// which the disk cannot take, survives a gateway restart (it came back
// lost), and once space is freed everything is written and the capped
// journal's result says how much output is gone for good.
// Both ways of supervising sessions are covered: shared supervisors (many
// sessions in one process) and a supervisor process per session.
func TestDiskFullIsAState(t *testing.T) {
	for _, mode := range []string{"host", "process"} {
		t.Run(mode, func(t *testing.T) {
			diskFullScenario(t, []string{"CONCH_SUPERVISOR=" + mode})
		})
	}
}

func diskFullScenario(t *testing.T, env []string) {
	dir := smallDisk(t, "20m")
	home := filepath.Join(dir, "home")
	seedHome(home)
	os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"tools":{"exec":{"journalMaxBytes":4194304,"journalHeadBytes":1048576}}}`), 0o600)
	t.Cleanup(func() { e2etest.KillLeftovers(t, home) })
	g := e2etest.StartServe(t, home, env, "--listen", "127.0.0.1:0")
	filler := fillDisk(t, dir, 3<<20)

	// Both start printing once both are running (the first would fill
	// the disk before the second is accepted).
	gate := filepath.Join(t.TempDir(), "go")
	ids := map[string]string{}
	for _, name := range []string{"A", "B"} {
		_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "until [ -e " + gate + " ]; do sleep 0.05; done; yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 100000000; echo " + name + "-END", "background": true}, nil)
		d, _ := m["details"].(map[string]any)
		id, _ := d["sessionId"].(string)
		if id == "" {
			t.Fatalf("exec %s: %v", name, m)
		}
		ids[name] = id
	}
	os.WriteFile(gate, nil, 0o600)
	// Both journals hit the full disk: output is held back.
	for _, id := range ids {
		e2etest.Eventually(t, 60*time.Second, func() string {
			_, m := g.Do("POST", "/v1/sessions/"+id+"/poll", g.Token, map[string]any{}, nil)
			if text, _ := m["text"].(string); !strings.Contains(text, "no space left on device") {
				return "no held-back warning for " + id
			}
			return ""
		})
	}

	// What the journals left over is taken too: not a page is free.
	fillDisk(t, dir, 0)

	// Item 3: a new exec is refused at once with disk_full.
	start := time.Now()
	code, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo hi"}, nil)
	text, _ := m["text"].(string)
	if code != 507 || !strings.Contains(text, "out of disk space") || !strings.Contains(bodyCode(m), "disk_full") {
		t.Fatalf("exec on a full disk: %d %v", code, m)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("disk_full took %v", d)
	} else {
		t.Logf("exec on a full disk answered disk_full in %v", d)
	}
	// So is the CLI's, with the reason and a failure exit code.
	out, code := e2etest.CLI(t, "exec", "--home", home, "--", "echo", "hi")
	if code == 0 || !strings.Contains(out, "out of disk space") {
		t.Fatalf("conch exec on a full disk: exit %d: %s", code, out)
	}
	// The health answer stays 200 and says the home is full.
	code, m = g.Do("GET", "/v1/health", "", nil, nil)
	disk, _ := m["disk"].(map[string]any)
	if code != 200 || m["status"] != "degraded" || disk["full"] != true {
		t.Fatalf("health on a full disk: %d %v", code, m)
	}
	if m := metricsText(t, g); !strings.Contains(m, "conch_home_disk_full 1\n") {
		t.Fatalf("metrics on a full disk:\n%s", m)
	}
	if out, _ := exec.Command(e2etest.ConchBin, "doctor", "--home", home).CombinedOutput(); !strings.Contains(string(out), "home.disk_full") {
		t.Fatalf("doctor does not report the full disk:\n%s", out)
	}

	// kill reports promptly and says what is lost.
	start = time.Now()
	code, m = g.Do("POST", "/v1/sessions/"+ids["A"]+"/kill", g.Token, map[string]any{}, nil)
	took := time.Since(start)
	text, _ = m["text"].(string)
	if code != 200 || !strings.HasPrefix(text, "Killed session") || !strings.Contains(text, "out of disk space") {
		t.Fatalf("kill on a full disk (%v): %d %v", took, code, m)
	}
	if took > 20*time.Second {
		t.Fatalf("kill took %v", took)
	}
	t.Logf("kill on a full disk answered in %v", took)
	if _, err := os.Stat(proto.ExitPath(proto.SessionDir(home, ids["A"]))); err == nil {
		t.Fatal("exit.json written on a full disk: the test does not exercise the in-memory end state")
	}

	// A restart while the disk is still full: the killed session is
	// still killed (its supervisor keeps the end state until it can be
	// written), the running one still runs.
	tok := g.Token
	g.Stop()
	g = e2etest.StartServe(t, home, env, "--listen", "127.0.0.1:0")
	g.Token = tok
	_, m = g.Do("POST", "/v1/sessions/"+ids["A"]+"/poll", g.Token, map[string]any{}, nil)
	if d, _ := m["details"].(map[string]any); d["state"] != "killed" {
		t.Fatalf("killed session after a restart on a full disk: %v", m)
	}
	_, m = g.Do("POST", "/v1/sessions/"+ids["B"]+"/poll", g.Token, map[string]any{}, nil)
	if d, _ := m["details"].(map[string]any); d["status"] != "running" {
		t.Fatalf("running session after a restart on a full disk: %v", m)
	}

	// Space returns: the held state is written, exec works again, and
	// the capped journal's end says what is gone for good.
	os.Remove(filler)
	e2etest.Eventually(t, 60*time.Second, func() string {
		ex, ok, err := proto.ReadExit(proto.SessionDir(home, ids["A"]))
		if !ok || ex.State != "killed" {
			return "A's exit.json not written: " + errString(err)
		}
		return ""
	})
	// The polls' texts together hold the new output and the end.
	text = ""
	e2etest.Eventually(t, 120*time.Second, func() string {
		_, end := g.Do("POST", "/v1/sessions/"+ids["B"]+"/poll", g.Token, map[string]any{"timeout": 1000}, nil)
		s, _ := end["text"].(string)
		text += s
		if d, _ := end["details"].(map[string]any); d["status"] == "running" {
			return "B still running"
		}
		return ""
	})
	if !strings.Contains(text, "B-END") || !strings.Contains(text, "dropped by the journal cap") || !strings.Contains(text, "gone for good") {
		t.Fatalf("B's end does not say what the journal cap dropped: %q", text[max(0, len(text)-600):])
	}
	code, m = g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo hi"}, nil)
	if text, _ := m["text"].(string); code != 200 || text != "hi" {
		t.Fatalf("exec after space returned: %d %v", code, m)
	}
	if _, m = g.Do("GET", "/v1/health", "", nil, nil); m["status"] != "ok" {
		t.Fatalf("health after space returned: %v", m)
	}
	if m := metricsText(t, g); !strings.Contains(m, "conch_home_disk_full 0\n") {
		t.Fatalf("metrics after space returned:\n%s", m)
	}
}

// metricsText returns the gateway's /metrics page.
func metricsText(t *testing.T, g *e2etest.Gateway) string {
	t.Helper()
	req, _ := http.NewRequest("GET", g.Base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+g.Operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// bodyCode returns the error code of a failed tool result.
func bodyCode(m map[string]any) string {
	d, _ := m["details"].(map[string]any)
	e, _ := d["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestOperatorTokenOnFullDisk starts a first gateway on a full disk: it
// fails and leaves no operator.token (it used to leave an empty one that
// every later start used, so every operator call got 401 for good); once
// there is space the token is made whole. An empty token file left by an
// older conch is refused with a clear error, and doctor reports it.
func TestOperatorTokenOnFullDisk(t *testing.T) {
	dir := smallDisk(t, "2m")
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o700)
	t.Cleanup(func() { e2etest.KillLeftovers(t, home) })
	filler := fillDisk(t, dir, 0)
	tokPath := filepath.Join(home, "operator.token")
	out, _ := exec.Command(e2etest.ConchBin, "serve", "--home", home, "--listen", "127.0.0.1:0").CombinedOutput()
	if b, err := os.ReadFile(tokPath); err == nil {
		t.Fatalf("a serve on a full disk left operator.token %q (serve said %s)", b, out)
	}
	os.Remove(filler)
	g := e2etest.StartGateway(t, home)
	if code, m := g.Do("GET", "/v1/approvals", g.Operator, nil, nil); code != 200 {
		t.Fatalf("operator call after space returned: %d %v", code, m)
	}
	g.Stop()

	for _, bad := range []string{"", "\n", "cop_abc"} {
		os.WriteFile(tokPath, []byte(bad), 0o600)
		out, code := e2etest.CLI(t, "serve", "--home", home, "--listen", "127.0.0.1:0")
		if code == 0 || !strings.Contains(out, "operator.token is") {
			t.Fatalf("serve with operator.token %q: exit %d: %s", bad, code, out)
		}
		if out, _ := exec.Command(e2etest.ConchBin, "doctor", "--home", home).CombinedOutput(); !strings.Contains(string(out), "home.operator_token") {
			t.Fatalf("doctor does not report operator.token %q:\n%s", bad, out)
		}
	}
}

// TestResultSaysWhatTheJournalDropped: a foreground result whose journal
// cap dropped output says truncated, how many bytes are gone for good (in
// the text and in droppedBytes), and its omission marker no longer calls
// the pager the "full output". The cases cover both ways a result is
// rendered (the whole retained journal, and head and tail of a large
// one) and a run that dropped nothing.
func TestResultSaysWhatTheJournalDropped(t *testing.T) {
	cases := []struct {
		capBytes, outBytes int64
		dropped            bool
	}{
		{1 << 20, 3_000_000, true},
		{12 << 20, 30_000_000, true},
		{1 << 20, 100_000, false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("cap=%d/out=%d", tc.capBytes, tc.outBytes), func(t *testing.T) {
			c := e2etest.StartConch(t, e2etest.NewHome(t, fmt.Sprintf(`{"tools":{"exec":{"journalMaxBytes":%d}}}`, tc.capBytes)))
			r := c.Exec(map[string]any{"command": fmt.Sprintf("yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c %d; echo; echo LAST-LINE", tc.outBytes), "yieldMs": 120000})
			if r.Str("status") != "completed" || !strings.Contains(r.Text, "LAST-LINE") {
				t.Fatalf("result: %q %v", r.Text[max(0, len(r.Text)-300):], r.D)
			}
			dropped := r.Num("droppedBytes")
			if !tc.dropped {
				if dropped != -1 || strings.Contains(r.Text, "gone for good") {
					t.Fatalf("nothing was dropped, yet: droppedBytes %v, %q", dropped, r.Text[max(0, len(r.Text)-300):])
				}
				return
			}
			if r.D["truncated"] != true || dropped < float64(tc.outBytes-tc.capBytes-(1<<20)) || dropped > float64(tc.outBytes) {
				t.Fatalf("truncated %v droppedBytes %v for %d bytes through a %d-byte journal", r.D["truncated"], dropped, tc.outBytes, tc.capBytes)
			}
			if want := fmt.Sprintf("%d bytes of output were dropped by the journal cap", int64(dropped)); !strings.Contains(r.Text, want) || !strings.Contains(r.Text, "gone for good") {
				t.Fatalf("the text does not say %q: %q", want, r.Text[max(0, len(r.Text)-300):])
			}
			if strings.Contains(r.Text, "; full output: process log") {
				t.Fatalf("the marker promises the full output: %q", r.Text)
			}
		})
	}
}

// TestDiskFullDefaultJournal is the setup of the original report with the
// default configuration: a home on a 20 MiB tmpfs and two commands
// printing 100 MB each fill the disk with their journals alone. exec is
// refused with disk_full, a kill answers at once, a restart keeps the
// killed session killed, and removing the other session frees the space
// the end state needs.
func TestDiskFullDefaultJournal(t *testing.T) {
	dir := smallDisk(t, "20m")
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o700)
	t.Cleanup(func() { e2etest.KillLeftovers(t, home) })
	g := e2etest.StartGateway(t, home)
	// Both start printing once both are running: when A alone filled
	// the disk before B was accepted (a loaded machine), nothing could
	// free the space A's end state needs but A itself, and the test
	// waited for A's exit.json in vain.
	gate := filepath.Join(t.TempDir(), "go")
	ids := map[string]string{}
	for _, name := range []string{"A", "B"} {
		_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "until [ -e " + gate + " ]; do sleep 0.05; done; yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 100000000", "background": true}, nil)
		d, _ := m["details"].(map[string]any)
		id, _ := d["sessionId"].(string)
		if id == "" {
			t.Fatalf("exec %s: %v", name, m)
		}
		ids[name] = id
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, 60*time.Second, func() string {
		_, m := g.Do("POST", "/v1/sessions/"+ids["A"]+"/poll", g.Token, map[string]any{}, nil)
		if text, _ := m["text"].(string); !strings.Contains(text, "no space left on device") {
			return "no held-back warning"
		}
		return ""
	})
	fillDisk(t, dir, 0)
	if code, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo hi"}, nil); code != 507 || bodyCode(m) != "disk_full" {
		t.Fatalf("exec on a full disk: %d %v", code, m)
	}
	start := time.Now()
	code, m := g.Do("POST", "/v1/sessions/"+ids["A"]+"/kill", g.Token, map[string]any{}, nil)
	if text, _ := m["text"].(string); code != 200 || !strings.HasPrefix(text, "Killed session") || time.Since(start) > 20*time.Second {
		t.Fatalf("kill on a full disk (%v): %d %v", time.Since(start), code, m)
	}
	tok := g.Token
	g.Stop()
	g = e2etest.StartGateway(t, home)
	g.Token = tok
	_, m = g.Do("POST", "/v1/sessions/"+ids["A"]+"/poll", g.Token, map[string]any{}, nil)
	if d, _ := m["details"].(map[string]any); d["state"] != "killed" {
		t.Fatalf("killed session after a restart on a full disk: %v", m)
	}
	// Free the space: remove the other session (and the filler).
	os.Remove(filepath.Join(dir, "filler"))
	if id := ids["B"]; id != "" {
		g.Do("DELETE", "/v1/sessions/"+id, g.Token, nil, nil)
	}
	e2etest.Eventually(t, 60*time.Second, func() string {
		if ex, ok, _ := proto.ReadExit(proto.SessionDir(home, ids["A"])); !ok || ex.State != "killed" {
			return "A's exit.json not written"
		}
		return ""
	})
	// A's journal goes too: the disk is as it was before the test.
	g.Do("DELETE", "/v1/sessions/"+ids["A"], g.Token, nil, nil)
	e2etest.Eventually(t, 60*time.Second, func() string {
		if _, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo hi"}, nil); m["text"] != "hi" {
			return fmt.Sprintf("exec after space returned: %v", m)
		}
		return ""
	})
}
