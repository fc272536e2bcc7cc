package engine

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/shellenv"
)

// The login-shell PATH of gateway runs. Only the gateway
// host uses it: a sandbox has its own PATH, and a node's PATH is its
// service's. The probe starts with the engine when a gateway run is
// possible (else with the first gateway run), and its result is cached in
// the home (state/login-path.json) and in the user's cache directory
// (shellenv.UserLoginCache), keyed by the shell set-up, for the next engine
// and for the user's other homes.
//
// A call waits for the probe within its yield window (loginWait): a run
// that arrives before the probe ends proceeds with conch's own PATH and
// says so. The PATH is
// fixed in the plan, so the policy gate resolves executables with exactly
// the PATH the command then runs with.

// loginCachePath is the probe's cache file in home.
func loginCachePath(home string) string { return filepath.Join(home, "state", "login-path.json") }

// loginProbe returns the engine's probe, starting it on first use.
func (e *Engine) loginProbe() *shellenv.LoginProbe {
	e.loginOnce.Do(func() {
		e.login.Store(shellenv.StartLoginProbe(loginCachePath(e.home), shellenv.UserLoginCache()))
	})
	return e.login.Load()
}

// loginPATH returns the login-shell PATH for a gateway run with yield
// window window (< 0: synchronous), waiting for the probe as loginWait
// says (a synchronous run waits until the probe ends, itself bounded by
// CONCH_SHELL_ENV_TIMEOUT_MS; a background run does not wait). known is
// false when the probe had not finished; path is "" then and when the
// probe failed. waited is the time spent waiting.
func (e *Engine) loginPATH(window time.Duration) (path string, known bool, waited time.Duration) {
	start := time.Now()
	wait := loginWait(window)
	lp, ok, err := e.loginProbe().Wait(wait)
	if err != nil {
		lp = ""
	}
	return lp, ok, time.Since(start)
}

// gatewayLikely reports whether cfg sends some agent's runs to the gateway
// host: host gateway, or no host set (or sandbox) with sandboxing off. It
// decides only whether the probe starts with the engine; a gateway run
// that finds it not started (an elevated run, per-agent exec defaults)
// starts it.
func gatewayLikely(cfg *config.Config) bool {
	agents := []string{"", "main"}
	for id := range cfg.Agents {
		agents = append(agents, id)
	}
	for _, a := range agents {
		switch strings.ToLower(cfg.Exec(a).Host) {
		case "gateway":
			return true
		case "node":
		default:
			if !cfg.SandboxFor(a).On {
				return true
			}
		}
	}
	return false
}

// loginWait is how long a run with yield window window waits for a
// login-shell probe still running: all of the window but the last second
// (at least half of it), so that the command finds the same programs as
// the calls after it whenever the probe ends within the window, and still
// has time of its own to finish in it. A synchronous run (< 0) waits for
// the probe's end.
func loginWait(window time.Duration) time.Duration {
	if window < 0 {
		return -1
	}
	return max(window/2, window-time.Second)
}
