package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ttyBash is an interactive bash on a pseudo-terminal, as a user's.
type ttyBash struct {
	t   *testing.T
	f   *os.File
	mu  sync.Mutex
	out bytes.Buffer
	n   int // lines asked for so far
}

func startTTYBash(t *testing.T, rc string) *ttyBash {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	rcFile := filepath.Join(t.TempDir(), "bashrc")
	os.WriteFile(rcFile, []byte(rc), 0o600)
	cmd := exec.Command(bash, "--noprofile", "--rcfile", rcFile, "-i")
	cmd.Env = []string{
		"PATH=" + filepath.Dir(conchBin) + ":/usr/bin:/bin",
		"HOME=" + t.TempDir(), "TERM=dumb", "PS1=$ ", "INPUTRC=/dev/null",
		"CONCH_HOME=" + filepath.Join(t.TempDir(), "home"),
	}
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 400})
	if err != nil {
		t.Fatal(err)
	}
	b := &ttyBash{t: t, f: f}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			b.mu.Lock()
			b.out.Write(buf[:n])
			b.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); f.Close() })
	return b
}

var lineRE = regexp.MustCompile(`(?m)^LINE(\d+):(.*?)\r?$`)

// complete types text, presses Tab, and returns the command line as bash
// then holds it (it quotes the line and prefixes an echo, so the shell
// prints it, trailing blanks included).
func (b *ttyBash) complete(text string) string {
	b.t.Helper()
	b.n++
	n := b.n
	// Ctrl-U clears the line, Tab completes, Ctrl-A and Ctrl-E go to its
	// start and end.
	fmt.Fprintf(b.f, "\x15%s\t\x01echo LINE%d:\"\x05\"\r", text, n)
	deadline := time.Now().Add(slow(30 * time.Second))
	for time.Now().Before(deadline) {
		b.mu.Lock()
		s := b.out.String()
		b.mu.Unlock()
		for _, m := range lineRE.FindAllStringSubmatch(s, -1) {
			if m[1] == fmt.Sprint(n) {
				return m[2]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.t.Fatalf("no completed line for %q; terminal:\n%s", text, b.out.String())
	return ""
}

func (b *ttyBash) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

// TestBashCompletionTabs presses Tab in an interactive bash that loaded
// the script as the README says (source <(conch completion bash)), without
// the bash-completion package, and, where it is installed, with it: for
// every command of the tree, "--hel" completes to "--help", and every
// subcommand completes from its name less one letter. Tab must never
// print an error.
func TestBashCompletionTabs(t *testing.T) {
	setups := map[string]string{"without bash-completion": ""}
	for _, p := range []string{"/usr/share/bash-completion/bash_completion", "/etc/bash_completion"} {
		if _, err := os.Stat(p); err == nil {
			setups["with bash-completion"] = ". " + p + "\n"
			break
		}
	}
	if len(setups) == 1 {
		t.Log("the bash-completion package is not installed: only the script's own fallback is checked")
	}
	paths := commandPaths(t)
	for name, pre := range setups {
		t.Run(name, func(t *testing.T) {
			b := startTTYBash(t, pre+"source <(conch completion bash)\n")
			if got := b.complete("conch approvals pendin"); got != "conch approvals pending " {
				t.Fatalf("conch approvals pendin<Tab>: %q\nterminal:\n%s", got, b.output())
			}
			children := map[string][]string{}
			for _, p := range paths {
				if len(p) > 0 {
					parent := strings.Join(p[:len(p)-1], " ")
					children[parent] = append(children[parent], p[len(p)-1])
				}
			}
			for _, p := range paths {
				line := strings.Join(append([]string{"conch"}, p...), " ")
				if got := b.complete(line + " --hel"); got != line+" --help " {
					t.Errorf("%s --hel<Tab>: %q", line, got)
				}
				if len(p) == 0 {
					continue
				}
				sib := children[strings.Join(p[:len(p)-1], " ")]
				name := p[len(p)-1]
				prefix := name[:len(name)-1]
				unique := true
				for _, s := range sib {
					if s != name && strings.HasPrefix(s, prefix) {
						unique = false
					}
				}
				if !unique || prefix == "" {
					continue
				}
				partial := strings.TrimSuffix(line, name) + prefix
				if got := b.complete(partial); got != line+" " {
					t.Errorf("%s<Tab>: %q, want %q", partial, got, line+" ")
				}
			}
			if out := b.output(); strings.Contains(out, "command not found") || strings.Contains(out, "No such file") {
				t.Errorf("Tab printed an error:\n%s", out)
			}
		})
	}
}
