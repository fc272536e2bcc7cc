package process

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// Output hygiene: what an agent reads back from real tools' terminal
// output, and the non-interactive environment that keeps commands from
// waiting for a person. The samples are raw recordings in bench/testdata
// (bench/testdata/record/record.sh; bench/README.md).

// hygieneSample is one recorded output and what its cleaned text must show.
type hygieneSample struct {
	file string
	// want: substrings of the cleaned text; last: prefix of its last line;
	// gone: substrings that only intermediate frames hold (spinners,
	// progress bars redrawn in place), which must have been collapsed.
	want []string
	last string
	gone []string
}

var hygieneSamples = []hygieneSample{
	{
		file: "npm-install.raw", // real npm 11, spinner ESC[1G ESC[0K
		want: []string{
			"npm warn deprecated conch-demo-path@0.6.3: conch-demo-path@0.6 is no longer maintained; upgrade to conch-demo-path@1\n",
			"npm warn deprecated conch-demo-colors@1.4.0: Please upgrade to conch-demo-colors@2, which fixes a ReDoS in strip()\n",
		},
		last: "added 8 packages in ",
		gone: []string{"⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏", "⠋"},
	},
	{
		file: "npm6-install.raw", // simulated npm 6 gauge
		want: []string{
			"npm WARN deprecated request@2.88.2: request has been deprecated, see https://github.com/request/request/issues/3142\n",
			"\nadded 1687 packages from 800 contributors and audited 1692 packages in 41.532s\n",
			"\nfound 4 vulnerabilities (2 moderate, 2 high)\n",
			"npm WARN notsup SKIPPING OPTIONAL DEPENDENCY: Unsupported platform for fsevents@2.1.2",
		},
		last: "  run `npm audit fix` to fix them, or `npm audit` for details",
		gone: []string{"fetchMetadata:", "resolveWithNewModule", "extract:", "[....", "] \\ "},
	},
	{
		file: "pip-install.raw", // real pip 23, rich progress bars
		want: []string{
			"Collecting conch-demo-app\n",
			"━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 9.5/9.5 MB ",
			"━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 2.6/2.6 MB ",
			"\nInstalling collected packages: conch-demo-utils, conch-demo-numeric, conch-demo-cli, conch-demo-models, conch-demo-http, conch-demo-app\n",
			"\nSuccessfully installed conch-demo-app-2.4.1 conch-demo-cli-5.0.2 conch-demo-http-1.8.0 conch-demo-models-0.9.3 conch-demo-numeric-3.1.0 conch-demo-utils-1.2.0",
		},
		gone: []string{"0.0/9.5 MB", "0.0/2.6 MB", "eta -:--:--", "╸"},
	},
	{
		file: "cargo-build.raw", // real cargo, colours and the Building bar
		want: []string{
			"   Compiling demo-util v0.3.1 (",
			"warning: unused variable: `retries`\n   --> demo-store/src/lib.rs:543:9\n",
			"warning: `demo-net` (lib) generated 3 warnings (run `cargo fix --lib -p demo-net` to apply 3 suggestions)\n",
			"   Compiling demo-app v1.4.0 (",
		},
		last: "    Finished `dev` profile [unoptimized + debuginfo] target(s) in ",
		gone: []string{"Building [", "] 3/7: "},
	},
	{
		file: "service-log.raw", // generated, 1.2 MB
		want: []string{
			"\ndb is unavailable - sleeping\n[previous line repeated 419 times]\n",
			" INFO [db] connected after 420 attempts; running migrations\n",
			" chars omitted; full output: process log sessionId=",
			" ERROR [main] health check failed 3 times in a row; exiting with status 1\n",
		},
		last: "api-1  | orders-api exited with code 1",
	},
}

func hygieneSamplePath(t *testing.T, file string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "bench", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("sample missing (bench/testdata/record/record.sh records it): %v", err)
	}
	return p
}

func TestHygieneCleanedSamples(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"quotas":{"execPerSecond":0}}`))
	for _, sm := range hygieneSamples {
		t.Run(strings.TrimSuffix(sm.file, ".raw"), func(t *testing.T) {
			raw, err := os.ReadFile(hygieneSamplePath(t, sm.file))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), "\x1b[") {
				t.Fatalf("%s holds no escape sequence: not a terminal recording", sm.file)
			}
			r := c.Exec(map[string]any{"command": "cat '" + hygieneSamplePath(t, sm.file) + "'", "yieldMs": 30000})
			if r.Str("status") != "completed" || r.Num("exitCode") != 0 {
				t.Fatalf("cat %s: status %q exit %v: %.300q", sm.file, r.Str("status"), r.D["exitCode"], r.Text)
			}
			text := r.Text
			if i := strings.IndexByte(text, 0x1b); i >= 0 {
				t.Errorf("ESC byte left at %d: %q", i, text[max(0, i-60):min(len(text), i+60)])
			}
			if i := strings.IndexByte(text, '\r'); i >= 0 {
				t.Errorf("CR left at %d: %q", i, text[max(0, i-60):min(len(text), i+60)])
			}
			for _, w := range sm.want {
				if !strings.Contains(text, w) {
					t.Errorf("cleaned text lacks %q", w)
				}
			}
			for _, g := range sm.gone {
				if strings.Contains(text, g) {
					i := strings.Index(text, g)
					t.Errorf("cleaned text still holds an intermediate frame (%q): %q", g, text[max(0, i-80):min(len(text), i+80)])
				}
			}
			lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
			if last := lines[len(lines)-1]; sm.last != "" && !strings.HasPrefix(last, sm.last) {
				t.Errorf("last line %q, want it to start with %q", last, sm.last)
			}
			if n, limit := len([]rune(text)), 200000+1000; n > limit {
				t.Errorf("cleaned text has %d chars, over %d", n, limit)
			}
			if len(text)*2 > len(raw) && len(raw) > 100000 {
				t.Errorf("cleaned text %d bytes from %d raw: less than half removed", len(text), len(raw))
			}
		})
	}
}

// TestHygieneGitCloneNoPrompt: git asking for credentials must fail at
// once instead of waiting at a Username prompt nobody will answer, on
// pipes and on a terminal. The control run, with the non-interactive
// environment turned off, shows that on a terminal git would wait.
func TestHygieneGitCloneNoPrompt(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
	}))
	defer srv.Close()
	url := srv.URL + "/private.git"
	// Credentials from the environment of whoever runs the tests must not
	// answer for the prompt.
	for _, k := range []string{"GIT_ASKPASS", "SSH_ASKPASS", "GIT_TERMINAL_PROMPT"} {
		if _, ok := os.LookupEnv(k); ok {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}

	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"quotas":{"execPerSecond":0}}`))
	for _, pty := range []bool{false, true} {
		t.Run(fmt.Sprintf("pty=%v", pty), func(t *testing.T) {
			before := hits.Load()
			start := time.Now()
			r := c.Exec(map[string]any{"command": "git clone " + url, "pty": pty, "timeout": 30, "yieldMs": 30000})
			d := time.Since(start)
			if d > 10*time.Second {
				t.Fatalf("git clone took %v (status %q): %.300q", d, r.Str("status"), r.Text)
			}
			// A non-zero exit code is still status "completed" in exec
			// results (docs/tools.md); only 126 and 127 are "failed".
			if code := r.Num("exitCode"); code <= 0 || r.IsError {
				t.Fatalf("git clone: status %q exitCode %v after %v: %.300q", r.Str("status"), r.D["exitCode"], d, r.Text)
			}
			if !strings.Contains(r.Text, "terminal prompts disabled") {
				t.Errorf("git clone did not fail for the disabled prompt: %q", r.Text)
			}
			if hits.Load() == before {
				t.Errorf("the server saw no request: git failed for another reason: %q", r.Text)
			}
			t.Logf("pty=%v: failed in %v, exit code %v", pty, d.Round(time.Millisecond), r.D["exitCode"])
		})
	}

	t.Run("control", func(t *testing.T) {
		c := e2etest.StartConch(t, e2etest.NewHome(t, `{"quotas":{"execPerSecond":0},"tools":{"exec":{"nonInteractiveEnv":{}}}}`))
		r := c.Exec(map[string]any{"command": "git clone " + url, "pty": true, "background": true, "timeout": 30})
		id := r.Str("sessionId")
		w := c.Process(map[string]any{"action": "wait", "sessionId": id, "until": "regex", "pattern": "Username for", "timeout": 10000})
		c.Process(map[string]any{"action": "kill", "sessionId": id})
		if w.Str("outcome") != "met" && w.Str("outcome") != "input" {
			t.Fatalf("without the non-interactive environment git on a terminal should wait at its Username prompt: %q %v", w.Text, w.D)
		}
		t.Logf("control, pty: %s", w.Text)
		// On pipes the command has no controlling terminal (its supervisor
		// runs in a session of its own), so git cannot prompt even then.
		start := time.Now()
		p := c.Exec(map[string]any{"command": "git clone " + url, "timeout": 30, "yieldMs": 30000})
		t.Logf("control, pipes: exit code %v after %v: %q", p.D["exitCode"], time.Since(start).Round(time.Millisecond), p.Text)
	})
}

// TestHygieneNonInteractiveEnv: commands see the non-interactive
// environment, over values conch itself inherited.
func TestHygieneNonInteractiveEnv(t *testing.T) {
	t.Setenv("PAGER", "less")
	t.Setenv("GIT_TERMINAL_PROMPT", "1")
	c := e2etest.StartConch(t, e2etest.NewHome(t, `{"quotas":{"execPerSecond":0}}`))
	for _, pty := range []bool{false, true} {
		r := c.Exec(map[string]any{"command": "env", "pty": pty})
		if r.Str("status") != "completed" {
			t.Fatalf("env pty=%v: %q", pty, r.Text)
		}
		vars := map[string]string{}
		for _, l := range strings.Split(r.Text, "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				vars[k] = v
			}
		}
		for k, want := range map[string]string{
			"GIT_TERMINAL_PROMPT": "0", "PAGER": "cat", "GIT_PAGER": "cat", "MANPAGER": "cat",
			"GCM_INTERACTIVE": "never", "DEBIAN_FRONTEND": "noninteractive", "PIP_NO_INPUT": "1",
		} {
			if got, ok := vars[k]; !ok || got != want {
				t.Errorf("pty=%v: %s=%q (set %v), want %q", pty, k, got, ok, want)
			}
		}
	}
}
