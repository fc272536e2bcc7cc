package keys

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

var (
	none = Modes{}
	ac   = Modes{AppCursor: true}
	bp   = Modes{BracketedPaste: true}
	both = Modes{AppCursor: true, BracketedPaste: true}
)

var trackerTests = []struct {
	name string
	out  string
	want Modes
}{
	{"empty", "", none},
	{"text", "hello\r\nworld", none},
	{"decckm on", e + "[?1h", ac},
	{"decckm off", e + "[?1h" + e + "[?1l", none},
	{"bracketed on", e + "[?2004h", bp},
	{"bracketed off", e + "[?2004h$ " + e + "[?2004l", none},
	{"combined", e + "[?1;2004h", both},
	{"combined reversed", e + "[?2004;1h", both},
	{"combined among others", e + "[?1049;1;25;2004h", both},
	{"combined reset", e + "[?1;2004h" + e + "[?1;2004l", none},
	{"partial reset", e + "[?1;2004h" + e + "[?1l", bp},
	{"smkx", e + "[?1h" + e + "=", ac},
	{"rmkx", e + "[?1h" + e + "=" + e + "[?1l" + e + ">", none},
	{"RIS", e + "[?1;2004h" + e + "c", none},
	{"RIS then set", e + "c" + e + "[?2004h", bp},
	{"text around", "abc" + e + "[1mbold" + e + "[0m" + e + "[?1hdef", ac},
	{"utf-8 around", "é" + e + "[?2004hü日本", bp},
	{"ansi mode, not private", e + "[1h" + e + "[2004h", none},
	{"other private modes", e + "[?12h" + e + "[?10h" + e + "[?11h" + e + "[?20041h" + e + "[?200h", none},
	{"leading zero", e + "[?01h" + e + "[?02004h", both},
	{"empty parameter", e + "[?;1h", ac},
	{"DECRQM is not a set", e + "[?1$p" + e + "[?2004$p", none},
	{"sub-parameter", e + "[?1:2h", none},
	{"second question mark", e + "[?1?h", none},
	{"huge parameter", e + "[?99999999999999999999999999h" + e + "[?1h", ac},
	{"huge parameter reads as itself", e + "[?10000000000000000000000000001h", none},
	{"CAN cancels", e + "[?1\x18h", none},
	{"SUB cancels", e + "[?1\x1ah", none},
	{"ESC restarts", e + "[?1" + e + "[?2004h", bp},
	{"double ESC", e + e + "[?1h", ac},
	{"C0 inside continues", e + "[?1\nh", ac},
	{"high byte aborts", e + "[?1\xc3h", none},
	{"OSC title then set", e + "]0;title\a" + e + "[?2004h", bp},
	{"other escapes", e + "7" + e + "8" + e + "(B" + e + "M" + e + "[?1h", ac},
	{"ESC ( c is not RIS", e + "[?1h" + e + "(c", ac},
	{"CSI final without params", e + "[H" + e + "[2J" + e + "[?2004h", bp},
	{"set twice", e + "[?1h" + e + "[?1h", ac},
	{"vim-like startup", e + "[?1049h" + e + "[22;0;0t" + e + "[?1h" + e + "=" + e + "[?2004h" + e + "[H" + e + "[2J", both},
	{"vim-like exit", e + "[?1049h" + e + "[?1h" + e + "=" + e + "[?2004h" + "text" + e + "[?2004l" + e + "[?1l" + e + ">" + e + "[?1049l", none},
}

// feed writes out to a new Tracker in the given chunks.
func feed(chunks ...string) Modes {
	var tr Tracker
	for _, c := range chunks {
		tr.Write([]byte(c))
	}
	return tr.Modes()
}

func TestTracker(t *testing.T) {
	for _, tt := range trackerTests {
		if got := feed(tt.out); got != tt.want {
			t.Errorf("%s: whole: %+v, want %+v", tt.name, got, tt.want)
		}
		// Byte by byte.
		chunks := strings.Split(tt.out, "")
		if tt.out != "" {
			chunks = nil
			for i := 0; i < len(tt.out); i++ {
				chunks = append(chunks, tt.out[i:i+1])
			}
		}
		if got := feed(chunks...); got != tt.want {
			t.Errorf("%s: byte by byte: %+v, want %+v", tt.name, got, tt.want)
		}
		// Every split into two writes, and into three writes.
		for i := 0; i <= len(tt.out); i++ {
			if got := feed(tt.out[:i], tt.out[i:]); got != tt.want {
				t.Errorf("%s: split at %d: %+v, want %+v", tt.name, i, got, tt.want)
			}
			for j := i; j <= len(tt.out); j++ {
				if got := feed(tt.out[:i], "", tt.out[i:j], tt.out[j:]); got != tt.want {
					t.Errorf("%s: split at %d,%d: %+v, want %+v", tt.name, i, j, got, tt.want)
				}
			}
		}
	}
}

// TestTrackerStream feeds one long stream in random chunks and checks the modes after each
// mode change.
func TestTrackerStream(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	events := []struct {
		seq  string
		want Modes
	}{
		{e + "[?1h", ac},
		{e + "[?2004h", both},
		{e + "[?1l", bp},
		{e + "c", none},
		{e + "[?1;2004h", both},
		{e + "[?2004;1l", none},
	}
	var tr Tracker
	for round := 0; round < 200; round++ {
		for _, ev := range events {
			stream := "text " + strings.Repeat("x", r.IntN(50)) + e + "[31mred" + e + "[0m\r\n" + ev.seq
			for len(stream) > 0 {
				n := 1 + r.IntN(len(stream))
				tr.Write([]byte(stream[:n]))
				stream = stream[n:]
			}
			if got := tr.Modes(); got != ev.want {
				t.Fatalf("round %d after %q: %+v, want %+v", round, ev.seq, got, ev.want)
			}
		}
	}
}

func TestTrackerConcurrentModes(t *testing.T) {
	var tr Tracker
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				_ = tr.Modes()
			}
		}
	})
	for range 1000 {
		tr.Write([]byte(e + "[?1;2004h"))
		tr.Write([]byte(e + "[?1;2004l"))
	}
	close(done)
	wg.Wait()
}

func TestTrackerWithEncode(t *testing.T) {
	var tr Tracker
	tr.Write([]byte("vim starting" + e + "[?1"))
	tr.Write([]byte("h" + e + "="))
	parts, _ := Encode("", nil, []string{"Up", "C-Up"}, tr.Modes())
	if got, want := string(bytes.Join(parts, nil)), e+"OA"+e+"[1;5A"; got != want {
		t.Errorf("after DECCKM: %q, want %q", got, want)
	}
}

func FuzzTracker(f *testing.F) {
	for _, tt := range trackerTests {
		f.Add(tt.out, uint(len(tt.out)/2))
	}
	f.Fuzz(func(t *testing.T, out string, split uint) {
		i := int(split % uint(len(out)+1))
		whole := feed(out)
		if got := feed(out[:i], out[i:]); got != whole {
			t.Fatalf("split at %d: %+v, whole %+v", i, got, whole)
		}
	})
}

func BenchmarkTrackerPlain(b *testing.B) {
	chunk := bytes.Repeat([]byte("plain output line without escapes\n"), 1000)
	var tr Tracker
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		tr.Write(chunk)
	}
}

func BenchmarkTrackerColored(b *testing.B) {
	chunk := bytes.Repeat([]byte(e+"[1;32mok"+e+"[0m colored output line\n"), 1000)
	var tr Tracker
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		tr.Write(chunk)
	}
}
