//go:build unix

package ledger

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHostileLedgerFiles: whoever can write the ledger directory (or the home) may put
// symlinks, FIFOs and huge files where the ledger writes and reads. The ledger writes
// nothing through a symlink (a gateway running as root would otherwise overwrite any
// file), never blocks on a FIFO, and does not read a huge HEAD or key into memory; each
// case fails the append or is recorded, and the victim file is untouched.
func TestHostileLedgerFiles(t *testing.T) {
	const victimText = "precious\n"
	type setup func(t *testing.T, home, victim string)
	cases := []struct {
		name string
		set  setup
		// rotate makes the append start a new file (ledger-000002.jsonl).
		rotate bool
	}{
		{"HEAD symlink", func(t *testing.T, home, victim string) {
			replace(t, filepath.Join(Dir(home), headName), func(p string) error { return os.Symlink(victim, p) })
		}, false},
		{"HEAD FIFO", func(t *testing.T, home, victim string) {
			replace(t, filepath.Join(Dir(home), headName), func(p string) error { return unix.Mkfifo(p, 0o600) })
		}, false},
		{"HEAD huge", func(t *testing.T, home, victim string) {
			p := filepath.Join(Dir(home), headName)
			if err := os.Truncate(p, 1<<40); err != nil {
				t.Skipf("no sparse 1 TiB file here: %v", err)
			}
		}, false},
		{"next file symlink", func(t *testing.T, home, victim string) {
			if err := os.Symlink(victim, filepath.Join(Dir(home), fileName(2))); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"next file FIFO", func(t *testing.T, home, victim string) {
			if err := unix.Mkfifo(filepath.Join(Dir(home), fileName(2)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"lock symlink", func(t *testing.T, home, victim string) {
			replace(t, filepath.Join(Dir(home), ".lock"), func(p string) error { return os.Symlink(victim, p) })
		}, false},
		{"key FIFO", func(t *testing.T, home, victim string) {
			replace(t, KeyPath(home), func(p string) error { return unix.Mkfifo(p, 0o600) })
		}, false},
		{"key huge", func(t *testing.T, home, victim string) {
			if err := os.Truncate(KeyPath(home), 1<<40); err != nil {
				t.Skipf("no sparse 1 TiB file here: %v", err)
			}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim")
			os.WriteFile(victim, []byte(victimText), 0o600)
			opts := Options{}
			if c.rotate {
				opts.RotateBytes = 1
			}
			l, err := Open(home, opts)
			if err != nil {
				t.Fatal(err)
			}
			appendN(t, l, 1)
			l.Close()
			c.set(t, home, victim)

			done := make(chan string, 1)
			go func() {
				var out bytes.Buffer
				l, err := Open(home, opts)
				if err != nil {
					done <- "open: " + err.Error()
					return
				}
				if _, err := l.Append(Record{Type: TypeNode}); err != nil {
					out.WriteString("append: " + err.Error() + "; ")
				}
				l.Close()
				rep, err := Verify(home)
				if err != nil {
					out.WriteString("verify: " + err.Error())
				} else {
					out.WriteString("verify: " + rep.String())
				}
				done <- out.String()
			}()
			select {
			case res := <-done:
				t.Log(res)
				// The append goes through; verify reports what it found, not a break.
				if strings.Contains(res, "append:") || strings.Contains(res, "broken") {
					t.Errorf("after %s: %s", c.name, res)
				}
			case <-time.After(time.Minute):
				t.Fatal("the ledger blocked (a FIFO opened or read as a file?)")
			}
			if b, _ := os.ReadFile(victim); string(b) != victimText {
				t.Fatalf("the victim behind the symlink was written: %q", b)
			}
		})
	}
}

// replace removes path and makes a new one there with mk.
func replace(t *testing.T, path string, mk func(string) error) {
	t.Helper()
	os.Remove(path)
	if err := mk(path); err != nil {
		t.Fatal(err)
	}
}
