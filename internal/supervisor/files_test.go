package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// stateFiles are a sample of each kind of state file the writers here
// produce: objects (checksummed) and a list (JSON only).
func stateFiles() map[string]any {
	code, sig := 3, "SIGTERM"
	return map[string]any{
		"exit.json": Exit{State: StateExited, ExitCode: &code, Signal: &sig, EndedAt: 1764547200000, DurationMs: 1234, OutputBytes: 4096, Final: true},
		"meta.json": Meta{V: 1, ID: "brisk-otter", Agent: "main", Command: "make test", Argv: []string{"/bin/sh", "-c", "make test"}, Cwd: "/w", Host: "gateway",
			State: "running", StartedAt: 1764547200000, PID: 4242, PGID: 4242, PIDStartTime: 99, SupervisorPID: 4200, Socket: "/h/run/s/host-4200.sock", Cgroup: &Cgroup{V2: "/sys/fs/cgroup/conch-brisk-otter-4200"}},
		"state.json": map[string]any{"agent": "main", "backgrounded": true, "drainCursors": map[string]int64{"main": 17}},
		"empty.json": struct{}{},
		"list.json":  []string{"a", "b"},
	}
}

// TestStateFileDamage generates every one-byte change (two different
// flips per offset) and every truncation of each state file: ReadJSON
// either reports ErrDamaged or returns exactly what was written. It never
// returns a different value without an error. Truncations of an object
// are always caught, and so is every flip that changes the value.
func TestStateFileDamage(t *testing.T) {
	dir := t.TempDir()
	for name, v := range stateFiles() {
		path := filepath.Join(dir, name)
		if err := WriteJSON(path, v); err != nil {
			t.Fatal(err)
		}
		good, _ := os.ReadFile(path)
		want := reflect.New(reflect.TypeOf(v))
		if err := ReadJSON(path, want.Interface()); err != nil {
			t.Fatalf("%s: intact file: %v", name, err)
		}
		check := func(what string, b []byte, mustFail bool) {
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			got := reflect.New(reflect.TypeOf(v))
			err := ReadJSON(path, got.Interface())
			switch {
			case err != nil && !errors.Is(err, ErrDamaged):
				t.Fatalf("%s %s: error does not wrap ErrDamaged: %v", name, what, err)
			case err == nil && mustFail:
				t.Fatalf("%s %s: damage not detected: %q", name, what, b)
			case err == nil && !reflect.DeepEqual(got.Elem().Interface(), want.Elem().Interface()):
				t.Fatalf("%s %s: read a different value without an error: %q", name, what, b)
			}
		}
		isObject := good[0] == '{'
		for n := 0; n < len(good); n++ {
			check("cut", good[:n], isObject)
		}
		for i := range good {
			for _, x := range []byte{0x01, 0x20} {
				b := bytes.Clone(good)
				b[i] ^= x
				check("flip", b, false)
			}
		}
		check("garbage", []byte("\x00\x00garbage"), true)
	}
}

// TestStateFileLegacy: a file an earlier conch wrote (no checksum member)
// is still read, and one cut short is still caught.
func TestStateFileLegacy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exit.json")
	code := 3
	b, _ := json.MarshalIndent(Exit{State: StateExited, ExitCode: &code, Final: true}, "", "  ")
	os.WriteFile(path, append(b, '\n'), 0o600)
	var e Exit
	if err := ReadJSON(path, &e); err != nil || e.ExitCode == nil || *e.ExitCode != 3 {
		t.Fatalf("legacy file: %+v, %v", e, err)
	}
	os.WriteFile(path, b[:len(b)/2], 0o600)
	if err := ReadJSON(path, &e); !errors.Is(err, ErrDamaged) {
		t.Fatalf("legacy file cut short: %v", err)
	}
}
