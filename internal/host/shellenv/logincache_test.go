//go:build unix

package shellenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeHome makes a home whose .profile adds dir to PATH and appends a line
// to marker each time a login shell reads it, and points HOME and SHELL
// (/bin/sh, listed in /etc/shells on Linux) at it.
func fakeHome(t *testing.T) (home, marker, dir string) {
	t.Helper()
	home = t.TempDir()
	marker = filepath.Join(home, "probed")
	dir = filepath.Join(home, "tools-bin")
	writeProfile(t, home, marker, dir, "")
	t.Setenv("HOME", home)
	t.Setenv("SHELL", "/bin/sh")
	if loginShell() != "/bin/sh" {
		t.Skip("/bin/sh is not listed in /etc/shells here")
	}
	return home, marker, dir
}

func writeProfile(t *testing.T, home, marker, dir, extra string) {
	t.Helper()
	prof := "echo x >> '" + marker + "'\nPATH='" + dir + "':$PATH\nexport PATH\n" + extra
	if err := os.WriteFile(filepath.Join(home, ".profile"), []byte(prof), 0o644); err != nil {
		t.Fatal(err)
	}
}

func probes(t *testing.T, marker string) int {
	b, _ := os.ReadFile(marker)
	return strings.Count(string(b), "x")
}

func TestLoginProbeCache(t *testing.T) {
	home, marker, dir := fakeHome(t)
	cache := filepath.Join(t.TempDir(), "state", "login-path.json")

	p := StartLoginProbe(cache)
	path, ok, err := p.Wait(-1)
	if !ok || err != nil || !strings.HasPrefix(path, dir+":") || p.Cached() {
		t.Fatalf("first probe: %q ok=%v err=%v cached=%v", path, ok, err, p.Cached())
	}
	if n := probes(t, marker); n != 1 {
		t.Fatalf("the first probe read .profile %d times", n)
	}
	fi, err := os.Stat(cache)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v %v", fi, err)
	}

	// Same set-up: the cache answers at once, no shell runs.
	p = StartLoginProbe(cache)
	if got, ok, err := p.Result(); !ok || err != nil || got != path || !p.Cached() {
		t.Fatalf("cached: %q ok=%v err=%v cached=%v", got, ok, err, p.Cached())
	}
	if n := probes(t, marker); n != 1 {
		t.Fatalf("a cached probe ran the shell (%d reads)", n)
	}

	// Each change of what the probe depends on makes it run again.
	changes := []struct {
		name string
		do   func()
	}{
		{"profile edited", func() { writeProfile(t, home, marker, dir, "# edited\n") }},
		{"new start-up file", func() { os.WriteFile(filepath.Join(home, ".bashrc"), []byte("# new\n"), 0o644) }},
		{"inherited PATH", func() { t.Setenv("PATH", os.Getenv("PATH")+":/nonexistent-conch-test") }},
		{"cache too old", func() {
			var c loginCache
			b, _ := os.ReadFile(cache)
			json.Unmarshal(b, &c)
			c.ProbedAt = time.Now().Add(-loginCacheTTL - time.Minute).UnixMilli()
			b, _ = json.Marshal(c)
			os.WriteFile(cache, b, 0o600)
		}},
		{"cache unreadable", func() { os.WriteFile(cache, []byte("{not json"), 0o600) }},
	}
	for i, c := range changes {
		c.do()
		p = StartLoginProbe(cache)
		if got, ok, err := p.Wait(-1); !ok || err != nil || !strings.HasPrefix(got, dir+":") || p.Cached() {
			t.Fatalf("%s: %q ok=%v err=%v cached=%v", c.name, got, ok, err, p.Cached())
		}
		if n := probes(t, marker); n != i+2 {
			t.Fatalf("%s: .profile read %d times, want %d", c.name, n, i+2)
		}
		if p = StartLoginProbe(cache); !p.Cached() {
			t.Fatalf("%s: the new result was not cached", c.name)
		}
	}
}

// A probe that outlasts its timeout fails, and the failure is cached (for
// a shorter time): the next process does not pay the timeout again.
func TestLoginProbeTimeoutCached(t *testing.T) {
	home, marker, dir := fakeHome(t)
	writeProfile(t, home, marker, dir, "sleep 30\n")
	t.Setenv("CONCH_SHELL_ENV_TIMEOUT_MS", "300")
	cache := filepath.Join(t.TempDir(), "login-path.json")
	start := time.Now()
	_, ok, err := StartLoginProbe(cache).Wait(-1)
	if !ok || err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("slow probe: ok=%v err=%v", ok, err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("timeout of 300 ms took %v", d)
	}
	p := StartLoginProbe(cache)
	if _, ok, err := p.Result(); !ok || err == nil || !p.Cached() {
		t.Fatalf("failure not cached: ok=%v err=%v", ok, err)
	}
}

// Stop ends a running probe with what its profile started, and caches
// nothing.
func TestLoginProbeStop(t *testing.T) {
	home, marker, dir := fakeHome(t)
	writeProfile(t, home, marker, dir, "sleep 919.3\n")
	cache := filepath.Join(t.TempDir(), "login-path.json")
	p := StartLoginProbe(cache)
	deadline := time.Now().Add(30 * time.Second)
	for probes(t, marker) == 0 || len(sleepers("919.3")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the probe did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Stop()
	if _, ok, err := p.Wait(30 * time.Second); !ok || err == nil {
		t.Fatalf("stopped probe: ok=%v err=%v", ok, err)
	}
	for len(sleepers("919.3")) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the profile's sleep outlived the probe: %v", sleepers("919.3"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Fatal("a stopped probe was cached")
	}
}

// sleepers lists the pids of live `sleep <arg>` processes.
func sleepers(arg string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || string(b) != "sleep\x00"+arg+"\x00" {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := strings.LastIndexByte(string(st), ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue // exited, not yet reaped by init
			}
		}
		out = append(out, e.Name())
	}
	return out
}

// A probe is ended gently: its profile's exit traps run (a lock file is
// released), and only what ignores SIGTERM is killed, after a grace.
func TestLoginProbeStopGently(t *testing.T) {
	home, marker, dir := fakeHome(t)
	lock := filepath.Join(home, "lock")
	writeProfile(t, home, marker, dir, `touch "$HOME/lock"; trap 'rm -f "$HOME/lock"; exit 1' TERM
(trap '' TERM; exec sleep 919.5) &
sleep 919.4 & wait
`)
	p := StartLoginProbe(filepath.Join(t.TempDir(), "login-path.json"))
	deadline := time.Now().Add(30 * time.Second)
	for len(sleepers("919.4")) == 0 || len(sleepers("919.5")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the probe did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Stop()
	if _, ok, err := p.Wait(30 * time.Second); !ok || err == nil {
		t.Fatalf("stopped probe: ok=%v err=%v", ok, err)
	}
	for len(sleepers("919.4")) > 0 || len(sleepers("919.5")) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("left running: %v %v", sleepers("919.4"), sleepers("919.5"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(lock); err == nil {
		t.Fatal("the profile's TERM trap did not run: its lock file is left")
	}
}

// TestLoginProbeSharedAcrossHomes: a result probed for one home's cache
// and the user's cache answers a fresh home at once (its first call then
// resolves commands as later ones do), and is copied into the fresh
// home's file; a changed profile is probed again.
func TestLoginProbeSharedAcrossHomes(t *testing.T) {
	home, marker, dir := fakeHome(t)
	user := filepath.Join(t.TempDir(), "conch", "login-path.json")
	first := filepath.Join(t.TempDir(), "state", "login-path.json")
	if path, ok, err := StartLoginProbe(first, user).Wait(-1); !ok || err != nil || !strings.HasPrefix(path, dir+":") {
		t.Fatalf("first home: %q %v %v", path, ok, err)
	}
	fresh := filepath.Join(t.TempDir(), "state", "login-path.json")
	p := StartLoginProbe(fresh, user)
	path, ok, err := p.Result()
	if !ok || err != nil || !p.Cached() || !strings.HasPrefix(path, dir+":") {
		t.Fatalf("fresh home: %q ok=%v err=%v cached=%v, want the shared result at once", path, ok, err, p.Cached())
	}
	if n := probes(t, marker); n != 1 {
		t.Errorf("the login shell ran %d times for two homes", n)
	}
	if b, err := os.ReadFile(fresh); err != nil || !strings.Contains(string(b), dir) {
		t.Errorf("the fresh home's cache: %q %v", b, err)
	}
	// A change to the profile is noticed: probed again.
	time.Sleep(10 * time.Millisecond)
	writeProfile(t, home, marker, dir+"2", "")
	if path, _, _ := StartLoginProbe(fresh, user).Wait(-1); !strings.HasPrefix(path, dir+"2:") {
		t.Errorf("after the profile changed: %q", path)
	}
	if n := probes(t, marker); n != 2 {
		t.Errorf("the login shell ran %d times, want 2", n)
	}
}

func TestLoginPATH(t *testing.T) {
	p, _, err := StartLoginProbe("").Wait(-1)
	if err != nil {
		t.Skipf("no login shell here: %v", err)
	}
	if !strings.Contains(p, "/usr/bin") {
		t.Fatalf("login PATH %q lacks /usr/bin", p)
	}
}
