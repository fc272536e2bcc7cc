//go:build unix

package shellenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// loginProbeMax caps what the login-shell probe may print.
const loginProbeMax = 2 << 20

// probeKillGrace is how long a probe being ended gets between SIGTERM and
// SIGKILL.
const probeKillGrace = 2 * time.Second

// LoginProbe is the login-shell PATH probe: `<shell> -l -c
// 'env -0'`, run once and remembered, failure included. <shell> is $SHELL
// when it is absolute, clean and listed in /etc/shells, else /bin/sh. The
// probe runs with the sanitised environment, HOME set to the real home and
// ZDOTDIR removed, and is bounded by CONCH_SHELL_ENV_TIMEOUT_MS (default
// 15000).
//
// The result is also kept in a cache file, keyed by what the probe depends
// on (see loginKey), so that the next process with the same shell set-up
// does not run the probe at all.
type LoginProbe struct {
	stop   context.CancelFunc // nil for a cached result
	done   chan struct{}
	path   string
	err    error
	cached bool
}

// Cache lifetimes: a result is re-probed after this long even when its key
// still matches (a file a profile sources may have changed), a failure
// sooner.
const (
	loginCacheTTL     = 24 * time.Hour
	loginCacheFailTTL = time.Hour
)

// StartLoginProbe returns the probe of this process's login shell. A
// result in one of cacheFiles (the first that has one) whose key matches
// is used at once, and copied to the files that lack it; otherwise the
// probe starts in the background and its result is written to every
// cache file (mode 0600, replaced atomically) when it is known. A ""
// file is skipped; no files means no cache. Errors writing a cache are
// ignored: the probe's result stands.
//
// The key (loginKey) holds what the result depends on, so one file can
// serve several homes of one user (UserLoginCache): a fresh home then
// resolves commands the way the user's other homes do from its first
// call, and a changed profile, shell or PATH is noticed and probed again.
func StartLoginProbe(cacheFiles ...string) *LoginProbe {
	p := &LoginProbe{done: make(chan struct{})}
	shell := loginShell()
	key := loginKey(shell)
	now := time.Now()
	for i, f := range cacheFiles {
		c, ok := readLoginCache(f, key, now)
		if !ok {
			continue
		}
		for _, g := range cacheFiles[:i] {
			writeLoginCacheEntry(g, c)
		}
		p.path, p.cached = c.Path, true
		if c.Error != "" {
			p.err = errors.New(c.Error)
		}
		close(p.done)
		return p
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	go func() {
		defer cancel()
		path, err := probeLoginPATH(ctx, shell)
		if ctx.Err() != nil {
			// Stopped: not a result worth keeping.
			path, err = "", errors.New("login-shell probe stopped")
		} else {
			for _, f := range cacheFiles {
				writeLoginCache(f, key, path, err, time.Now())
			}
		}
		p.path, p.err = path, err
		close(p.done)
	}()
	return p
}

// Stop ends a probe still running, with everything its profile started;
// its result is then an error, and nothing is cached.
func (p *LoginProbe) Stop() {
	if p.stop != nil {
		p.stop()
	}
}

// Done is closed when the result is known.
func (p *LoginProbe) Done() <-chan struct{} { return p.done }

// Result returns the login PATH and the probe's error; ok is false while
// the probe still runs.
func (p *LoginProbe) Result() (path string, ok bool, err error) {
	select {
	case <-p.done:
		return p.path, true, p.err
	default:
		return "", false, nil
	}
}

// Wait waits up to d for the result (d < 0: until it is known).
func (p *LoginProbe) Wait(d time.Duration) (path string, ok bool, err error) {
	switch {
	case d == 0:
		return p.Result()
	case d < 0:
		<-p.done
		return p.path, true, p.err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return p.path, true, p.err
	case <-t.C:
		return "", false, nil
	}
}

// Cached reports whether the result came from the cache file.
func (p *LoginProbe) Cached() bool { return p.cached }

func loginShell() string {
	sh := os.Getenv("SHELL")
	if sh == "" || !filepath.IsAbs(sh) || filepath.Clean(sh) != sh {
		return "/bin/sh"
	}
	b, err := os.ReadFile("/etc/shells")
	if err != nil {
		return "/bin/sh"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == sh {
			return sh
		}
	}
	return "/bin/sh"
}

func probeLoginPATH(parent context.Context, shell string) (string, error) {
	timeout := 15 * time.Second
	if v, err := strconv.Atoi(os.Getenv("CONCH_SHELL_ENV_TIMEOUT_MS")); err == nil && v > 0 {
		timeout = time.Duration(v) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, "-l", "-c", "env -0")
	var env []string
	home, _ := os.UserHomeDir()
	for _, kv := range Inherit(os.Environ()) {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "ZDOTDIR" {
			continue
		}
		env = append(env, kv)
	}
	if home != "" {
		env = append(env, "HOME="+home)
	}
	cmd.Env = env
	cmd.Stdin = nil
	cmd.Dir = "/"
	var out bytes.Buffer
	cmd.Stdout = &capped{buf: &out, max: loginProbeMax}
	// Its own process group, ended whole on timeout or Stop: SIGTERM
	// first, so that profile scripts run their exit traps (a tool that
	// holds a lock file while it runs, such as `pyenv rehash`, removes
	// it; SIGKILL would leave it behind and stall every later login
	// shell), then SIGKILL, after probeKillGrace, for whatever is left.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		pgid := cmd.Process.Pid
		err := syscall.Kill(-pgid, syscall.SIGTERM)
		go func() {
			time.Sleep(probeKillGrace)
			if syscall.Kill(-pgid, 0) == nil {
				syscall.Kill(-pgid, syscall.SIGKILL)
			}
		}()
		return err
	}
	cmd.WaitDelay = probeKillGrace + time.Second
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("%s -l timed out after %v", shell, timeout)
		}
		return "", fmt.Errorf("%s -l: %w", shell, err)
	}
	for _, kv := range bytes.Split(out.Bytes(), []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("PATH=")); ok {
			return string(v), nil
		}
	}
	return "", nil
}

// capped keeps at most max bytes and drops the rest.
type capped struct {
	buf *bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
