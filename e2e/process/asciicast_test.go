package process

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// castEvent is one "o" event of an asciicast v2 file.
type castEvent struct {
	t    float64
	data string
}

// parseCast checks an asciicast v2 file line by line and returns its
// header and events.
func parseCast(t *testing.T, b []byte) (map[string]any, []castEvent) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, 1<<24)
	if !sc.Scan() {
		t.Fatalf("empty recording")
	}
	var hdr map[string]any
	if err := json.Unmarshal(sc.Bytes(), &hdr); err != nil {
		t.Fatalf("header %q: %v", sc.Text(), err)
	}
	var evs []castEvent
	last := 0.0
	for sc.Scan() {
		var ev []any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || len(ev) != 3 {
			t.Fatalf("event line %q: %v", sc.Text(), err)
		}
		ts, ok1 := ev[0].(float64)
		code, ok2 := ev[1].(string)
		data, ok3 := ev[2].(string)
		if !ok1 || !ok2 || !ok3 || code != "o" {
			t.Fatalf("event %q is not [time, \"o\", data]", sc.Text())
		}
		if ts < last || ts < 0 {
			t.Fatalf("event times go back: %v after %v", ts, last)
		}
		last = ts
		evs = append(evs, castEvent{ts, data})
	}
	return hdr, evs
}

// TestLogAsciicast: conch log --format asciicast writes a PTY session as
// an asciicast v2 file, through the engine socket of a running conch mcp
// and from the home directly: the terminal size, the output whole (a UTF-8
// character split across two writes joined), and the journal's timings.
// A pipe session is refused with a clear message.
func TestLogAsciicast(t *testing.T) {
	home := e2etest.NewHome(t, "")
	c := e2etest.StartConch(t, home)
	cmd := `printf 'one\n'; sleep 0.6; printf '\033[31mtwo\033[0m \303'; sleep 0.3; printf '\251 three\n'`
	r := c.Exec(map[string]any{"command": cmd, "pty": true, "background": true})
	id := r.Str("sessionId")
	c.WaitEnd(id, 30*time.Second)
	pipe := c.Exec(map[string]any{"command": "echo piped", "background": true}).Str("sessionId")
	c.WaitEnd(pipe, 30*time.Second)

	check := func(how string, out []byte) {
		hdr, evs := parseCast(t, out)
		if hdr["version"] != 2.0 || hdr["width"] != 120.0 || hdr["height"] != 30.0 || hdr["command"] != cmd {
			t.Errorf("%s: header %v", how, hdr)
		}
		var all strings.Builder
		tOne, tTwo := -1.0, -1.0
		for _, e := range evs {
			if tOne < 0 && strings.Contains(all.String()+e.data, "one") {
				tOne = e.t
			}
			if tTwo < 0 && strings.Contains(all.String()+e.data, "two") {
				tTwo = e.t
			}
			all.WriteString(e.data)
			if strings.ContainsRune(e.data, '\uFFFD') {
				t.Errorf("%s: event with U+FFFD: %q", how, e.data)
			}
		}
		if want := "one\r\n\x1b[31mtwo\x1b[0m é three\r\n"; !strings.Contains(all.String(), want) {
			t.Errorf("%s: output %q lacks %q", how, all.String(), want)
		}
		if tTwo-tOne < 0.5 {
			t.Errorf("%s: \"two\" at %.3fs, \"one\" at %.3fs: the journal's timing is lost", how, tTwo, tOne)
		}
	}
	out, err := exec.Command(e2etest.ConchBin, "log", "--home", home, "--format", "asciicast", id).Output()
	if err != nil {
		t.Fatalf("conch log --format asciicast (engine socket): %v", err)
	}
	check("engine socket", out)

	o2, err := exec.Command(e2etest.ConchBin, "log", "--home", home, "--format", "asciicast", pipe).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != e2etest.ExitConflict || !strings.Contains(string(o2), "not a PTY session") {
		t.Errorf("pipe session: %v %q", err, o2)
	}
	o3, err := exec.Command(e2etest.ConchBin, "log", "--home", home, "--format", "asciicast", "-f", id).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != e2etest.ExitUsage || !strings.Contains(string(o3), "takes no --f") {
		t.Errorf("--format asciicast -f: %v %q", err, o3)
	}

	c.Close()
	out2, err := exec.Command(e2etest.ConchBin, "log", "--home", home, "--format", "asciicast", id).Output()
	if err != nil {
		t.Fatalf("conch log --format asciicast (own engine): %v", err)
	}
	check("own engine", out2)
	if string(out2) != string(out) {
		t.Errorf("the two recordings differ:\n%s\n%s", out, out2)
	}
}
