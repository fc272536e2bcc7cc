package hostenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// loginProbeMax caps what the login-shell probe may print.
const loginProbeMax = 2 << 20

var login struct {
	once sync.Once
	path string
	err  error
}

// LoginPATH returns the PATH a login shell of this user sets up
// (exec.md §5.3), probed once per process with `<shell> -l -c 'env -0'` and
// cached, failure included. <shell> is $SHELL when it is absolute, clean
// and listed in /etc/shells, else /bin/sh. The probe runs with the
// sanitised environment, HOME set to the real home and ZDOTDIR removed, and
// is bounded by CONCH_SHELL_ENV_TIMEOUT_MS (default 15000).
func LoginPATH() (string, error) {
	login.once.Do(func() { login.path, login.err = probeLoginPATH() })
	return login.path, login.err
}

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

func probeLoginPATH() (string, error) {
	timeout := 15 * time.Second
	if v, err := strconv.Atoi(os.Getenv("CONCH_SHELL_ENV_TIMEOUT_MS")); err == nil && v > 0 {
		timeout = time.Duration(v) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, loginShell(), "-l", "-c", "env -0")
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
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return "", err
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

// MergePATH puts the login PATH's entries first, then the existing ones,
// de-duplicated by exact string.
func MergePATH(loginPath, path string) string {
	seen := map[string]bool{}
	var out []string
	for _, p := range append(strings.Split(loginPath, ":"), strings.Split(path, ":")...) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return strings.Join(out, ":")
}
