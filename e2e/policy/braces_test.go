package policy

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestBraceBombRefused: the report's command, `echo` with 27 brace pairs
// (134 million words once bash expands them; a shell grew to 6.9 GB),
// is denied through the real binary even with echo allowlisted, with the
// bound in the reason, while a small expansion of the same shape runs.
func TestBraceBombRefused(t *testing.T) {
	t.Parallel()
	echo := echoPath(t)
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"off"`, `{"version":1,"agents":{"main":{"allowlist":[{"pattern":"`+echo+`"}]}}}`)
	// bash, the shell whose brace expansion the bound is for: under sh
	// (dash, CI's shell with SHELL unset) the small case prints its word.
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed: the small expansion needs a shell that expands braces")
	}
	// (The harness's cached login PATH is sh's: the first call may carry
	// a warning that bash's is not known yet; only the words are counted.)
	c := e2etest.StartConchEnv(t, home, []string{"SHELL=" + bash})
	r := c.Exec(map[string]any{"command": "echo " + strings.Repeat("{a,b}", 10)})
	words := 0
	for _, w := range strings.Fields(r.Text) {
		if len(w) == 10 && strings.Trim(w, "ab") == "" {
			words++
		}
	}
	if r.Str("status") != "completed" || words != 1024 {
		t.Fatalf("1,024 words: %.200q %v", r.Text, r.D)
	}
	for _, cmd := range []string{"echo " + strings.Repeat("{a,b}", 27), "echo {1..100000}{1..100000}", "echo {a..z}{a..z}{a..z}{a..z}"} {
		r := c.Exec(map[string]any{"command": cmd})
		if !r.IsError || !strings.HasPrefix(r.Text, "exec denied: ") || !strings.Contains(r.Text, "brace expansion too large") {
			t.Errorf("%.60s: %.300q %v", cmd, r.Text, r.D)
		}
	}
	out, _ := e2etest.CLI(t, "policy", "explain", "--home", home, "--", "echo "+strings.Repeat("{a,b}", 27))
	if !strings.Contains(out, "brace expansion too large") {
		t.Errorf("policy explain: %s", out)
	}
}
