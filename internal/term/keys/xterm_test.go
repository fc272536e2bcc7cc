package keys

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestXtermTerminfo checks the encoder against the key capabilities of the xterm terminfo
// entry on this machine (infocmp). That entry describes xterm with the keypad in
// application mode (smkx), so its cursor keys are the DECCKM forms.
//
// Known, deliberate difference: the spec sends Home and End with modifiers as tilde keys
// (C-Home = ESC[1;5~, C-End = ESC[4;5~) where xterm sends ESC[1;5H and ESC[1;5F; kHOM* and
// kEND* are therefore not compared.
func TestXtermTerminfo(t *testing.T) {
	infocmp, err := exec.LookPath("infocmp")
	if err != nil {
		t.Skip("infocmp not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, infocmp, "-x", "-1", "xterm").Output()
	if err != nil {
		t.Skipf("no xterm terminfo entry: %v", err)
	}
	caps := parseTerminfo(string(out))

	checks := map[string]keyCase{
		"kcuu1": {token: "Up", m: appCur},
		"kcud1": {token: "Down", m: appCur},
		"kcuf1": {token: "Right", m: appCur},
		"kcub1": {token: "Left", m: appCur},
		"khome": {token: "Home", m: appCur},
		"kend":  {token: "End", m: appCur},
		"kpp":   {token: "PageUp"},
		"knp":   {token: "PageDown"},
		"kich1": {token: "Insert"},
		"kdch1": {token: "Delete"},
		"kcbt":  {token: "S-Tab"},
		"kbs":   {token: "BSpace"},
		"kent":  {token: "KPEnter"},
		"ka1":   {token: "KP7"},
		"ka3":   {token: "KP9"},
		"kb2":   {token: "KP5"},
		"kc1":   {token: "KP1"},
		"kc3":   {token: "KP3"},
		// Shifted up/down (scroll forward/back).
		"kri":  {token: "S-Up"},
		"kind": {token: "S-Down"},
	}
	for i := 1; i <= 12; i++ {
		checks["kf"+strconv.Itoa(i)] = keyCase{token: "F" + strconv.Itoa(i)}
	}
	// Modified keys: suffix "" is shift, 3 alt, 4 shift+alt, 5 ctrl, 6 ctrl+shift, 7 ctrl+alt.
	mods := map[string]string{"": "S-", "3": "M-", "4": "M-S-", "5": "C-", "6": "C-S-", "7": "C-M-"}
	names := map[string]string{"kUP": "Up", "kDN": "Down", "kRIT": "Right", "kLFT": "Left",
		"kIC": "Insert", "kDC": "Delete", "kPRV": "PageUp", "kNXT": "PageDown"}
	for capName, key := range names {
		for suffix, prefix := range mods {
			checks[capName+suffix] = keyCase{token: prefix + key}
			checks[capName+suffix+"@app"] = keyCase{token: prefix + key, m: appCur}
		}
	}

	compared := 0
	for capName, c := range checks {
		want, ok := caps[strings.TrimSuffix(capName, "@app")]
		if !ok {
			continue // older terminfo without the extended capability
		}
		compared++
		parts, _ := Encode("", nil, []string{c.token}, c.m)
		if got := string(bytes.Join(parts, nil)); got != want {
			t.Errorf("%s: Encode(%q, %+v) = %q, xterm terminfo has %q", capName, c.token, c.m, got, want)
		}
	}
	t.Logf("compared %d capabilities", compared)
	if compared < 30 {
		t.Errorf("only %d capabilities compared; is the xterm entry complete?", compared)
	}
}

// parseTerminfo reads the string capabilities of `infocmp -1` output.
func parseTerminfo(src string) map[string]string {
	caps := map[string]string{}
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || !strings.HasSuffix(line, ",") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimSuffix(line, ","), "=")
		if !ok {
			continue
		}
		caps[name] = unescapeTerminfo(value)
	}
	return caps
}

// unescapeTerminfo decodes the escapes of terminfo(5) that key capabilities use.
func unescapeTerminfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '^' && i+1 < len(s):
			i++
			if s[i] == '?' {
				b.WriteByte(0x7f)
			} else {
				b.WriteByte(s[i] & 0x1f)
			}
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'E', 'e':
				b.WriteByte(0x1b)
			case 'r':
				b.WriteByte('\r')
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case 's':
				b.WriteByte(' ')
			case '0', '1', '2', '3':
				if i+2 < len(s) {
					v, err := strconv.ParseUint(s[i:i+3], 8, 8)
					if err == nil {
						b.WriteByte(byte(v))
						i += 2
						break
					}
				}
				b.WriteByte(s[i])
			default:
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// TestTmuxSendKeys compares the encoder with tmux's send-keys, a real program that takes the
// same key names: each token is sent by tmux to a pane running `cat` on a raw terminal, and
// the bytes cat received must equal Encode's. Skipped without tmux or with -short.
//
// Tokens where the spec deliberately differs from tmux 3.x are left out: modified Home/End
// (tmux, like xterm, sends ESC[1;5H), keypad keys (tmux sends plain digits unless the
// program enabled keypad mode), alt on F-keys (tmux sends ESC[1;3P), ctrl on Enter/Space
// (tmux sends nothing / NUL), S-Tab (not a tmux name; tmux uses BTab), the aliases tmux
// does not know (Return, Esc, Backspace, Del), and Home/End in application cursor mode
// (tmux keeps ESC[1~ and ESC[4~; the spec, like xterm's terminfo, sends ESC O H and ESC O F).
func TestTmuxSendKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tmux")
	}
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	normalTokens := []string{
		"Enter", "Tab", "Escape", "Space", "BSpace", "BTab",
		"Up", "Down", "Right", "Left", "Home", "End",
		"PageUp", "PgUp", "PPage", "PageDown", "PgDn", "NPage", "Insert", "IC", "Delete", "DC",
		"F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9", "F10", "F11", "F12",
		"enter", "UP", "bspace",
		"S-Up", "M-Up", "M-S-Up", "C-Up", "C-S-Up", "C-M-Up", "C-M-S-Up",
		"C-Down", "C-Right", "M-Left", "S-Left",
		"C-Delete", "M-DC", "S-Insert", "C-PageUp", "C-NPage", "M-S-PgDn",
		"M-Enter", "M-Tab", "M-Escape", "M-Space", "M-BSpace",
		"C-a", "C-c", "C-d", "C-z", "C-@", "C-[", "C-\\", "C-]", "C-^", "C-_", "C-?",
		"C-A", "c-x", "^c", "^D", "^[", "^?", "^@",
		"M-x", "M-X", "M-1", "C-M-x", "M-C-x", "M-c-a", "M-C-?",
		"a", "Z", "-", "~", "é", "日",
		"hello", "C-",
	}
	appTokens := []string{"Up", "Down", "Right", "Left", "C-Up", "S-Left", "M-Down", "PageUp", "Insert", "Enter"}

	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TERM=xterm"}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, tmux, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tmux %q: %v\n%s", args, err, out)
		}
	}
	t.Cleanup(func() {
		cmd := exec.Command(tmux, "-S", sock, "kill-server")
		cmd.Env = env
		_ = cmd.Run()
	})

	for _, mode := range []struct {
		name   string
		setup  string // printed by the pane program before it reads
		m      Modes
		tokens []string
	}{
		{"normal", "", normal, normalTokens},
		{"app", `printf '\033[?1h' && `, appCur, appTokens},
	} {
		out := filepath.Join(dir, mode.name+".out")
		ready := filepath.Join(dir, mode.name+".ready")
		script := fmt.Sprintf("%sstty raw -echo && : > '%s' && exec cat > '%s'", mode.setup, ready, out)
		run("new-session", "-d", "-s", mode.name, "-x", "80", "-y", "24", script)
		waitFor(ctx, t, func() bool { _, err := os.Stat(ready); return err == nil })

		// Send every token followed by C-j (LF) as a separator; no token produces LF.
		args := []string{"send-keys", "-t", mode.name}
		for _, tok := range mode.tokens {
			args = append(args, tok, "C-j")
		}
		run(args...)
		var got []byte
		waitFor(ctx, t, func() bool {
			got, _ = os.ReadFile(out)
			return bytes.Count(got, []byte{'\n'}) >= len(mode.tokens)
		})
		segments := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
		if len(segments) != len(mode.tokens) {
			t.Fatalf("%s: %d segments for %d tokens: %q", mode.name, len(segments), len(mode.tokens), got)
		}
		for i, tok := range mode.tokens {
			parts, _ := Encode("", nil, []string{tok}, mode.m)
			if want := string(bytes.Join(parts, nil)); segments[i] != want {
				t.Errorf("%s: %q: tmux sent %q, Encode gives %q", mode.name, tok, segments[i], want)
			}
		}
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(ctx context.Context, t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("timed out waiting for tmux")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
