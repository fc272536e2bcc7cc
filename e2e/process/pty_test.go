package process

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawEcho is a program that enables bracketed paste and application
// cursor mode like readline-based programs do, then prints the bytes it
// reads as hex, one read per line.
const rawEcho = `import os, sys, termios, tty
tty.setraw(0)
os.write(1, b"\x1b[?2004h\x1b[?1hREADY\r\n")
while True:
    b = os.read(0, 1024)
    os.write(1, (b.hex() + "\r\n").encode())
    if b"\x04" in b:
        break
`

func TestPTYKeysAndBracketedPaste(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	r := c.Exec(map[string]any{"command": "python3 -c '" + rawEcho + "'", "pty": true, "background": true})
	id := r.Str("sessionId")
	lastLine := func() string {
		t.Helper()
		var last string
		e2etest.Eventually(t, 10*time.Second, func() string {
			l := c.Process(map[string]any{"action": "log", "sessionId": id})
			lines := strings.Split(l.Text, "\n")
			last = lines[len(lines)-1]
			if last == "READY" || !strings.Contains(l.Text, "READY") {
				return "waiting: " + l.Text
			}
			return ""
		})
		return last
	}
	e2etest.Eventually(t, 10*time.Second, func() string {
		if l := c.Process(map[string]any{"action": "log", "sessionId": id}); !strings.Contains(l.Text, "READY") {
			return "not ready: " + l.Text
		}
		return ""
	})
	p := c.Process(map[string]any{"action": "paste", "sessionId": id, "text": "ab\x1b[201~c"})
	if p.Text != "Pasted 9 chars to session "+id+"." {
		t.Fatalf("paste: %q", p.Text)
	}
	// ESC[200~ ab c ESC[201~ with the embedded end marker removed.
	if got := lastLine(); got != "1b5b3230307e6162631b5b3230317e" {
		t.Fatalf("pasted bytes = %s", got)
	}
	// Application cursor mode is on: Up is ESC O A. C-c is 0x03.
	c.Process(map[string]any{"action": "send-keys", "sessionId": id, "keys": []any{"Up", "C-c", "M-x", "F5"}})
	e2etest.Eventually(t, 5*time.Second, func() string {
		l := c.Process(map[string]any{"action": "log", "sessionId": id})
		if !strings.HasSuffix(l.Text, "1b4f41031b781b5b31357e") {
			return "keys: " + l.Text
		}
		return ""
	})
	c.Process(map[string]any{"action": "send-keys", "sessionId": id, "hex": []any{"0x04"}})
	c.WaitEnd(id, 10*time.Second)
}

func TestExitNoticeNotification(t *testing.T) {
	c := e2etest.StartConch(t, e2etest.NewHome(t, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.CS.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	r := c.Exec(map[string]any{"command": "echo hi-there", "background": true})
	id := r.Str("sessionId")
	e2etest.Eventually(t, 10*time.Second, func() string {
		c.Mu.Lock()
		defer c.Mu.Unlock()
		for _, l := range c.Logs {
			d, _ := l.Data.(map[string]any)
			if d["sessionId"] == id && d["kind"] == "completed" && d["text"] == "Exec completed ("+id+", code 0) :: hi-there" && l.Logger == "conch.exec" {
				return ""
			}
		}
		return "no notification"
	})
}
