package proto

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/conchsh/conch/internal/base/fsutil"
)

// TestSessionFilesRoundTripAndDamage writes a sample of each session file
// through its writer and checks that its reader returns exactly what was
// written, and that every truncation and every one-byte flip of the file
// is either reported (fsutil.ErrDamaged) or reads back the same value.
func TestSessionFilesRoundTripAndDamage(t *testing.T) {
	code, sig := 3, "SIGTERM"
	exit := Exit{State: StateExited, ExitCode: &code, Signal: &sig, EndedAt: 1764547200000, DurationMs: 1234, OutputBytes: 4096, Final: true}
	meta := Meta{V: 1, ID: "brisk-otter", Agent: "main", Command: "make test", Argv: []string{"/bin/sh", "-c", "make test"}, Cwd: "/w", Host: "gateway",
		State: "running", StartedAt: 1764547200000, PID: 4242, PGID: 4242, PIDStartTime: 99, SupervisorPID: 4200, Socket: "/h/run/s/host-4200.sock",
		Cgroup: &Cgroup{V2: "/sys/fs/cgroup/conch-brisk-otter-4200"}}
	state := map[string]any{"agent": "main", "backgrounded": true, "drainCursors": map[string]any{"main": float64(17)}}
	dir := t.TempDir()
	files := []struct {
		path  string
		write func() error
		want  any
	}{
		{ExitPath(dir), func() error { return WriteExit(dir, exit) }, exit},
		{MetaPath(dir), func() error { return WriteMeta(dir, meta) }, meta},
		{StatePath(dir), func() error { return CreateState(dir, state) }, state},
	}
	for _, f := range files {
		if err := f.write(); err != nil {
			t.Fatal(err)
		}
		good, _ := os.ReadFile(f.path)
		read := func() (any, error) {
			got := reflect.New(reflect.TypeOf(f.want))
			err := fsutil.ReadJSON(f.path, got.Interface())
			return got.Elem().Interface(), err
		}
		if got, err := read(); err != nil || !reflect.DeepEqual(got, f.want) {
			t.Fatalf("%s: read back %+v, %v", f.path, got, err)
		}
		check := func(what string, b []byte, mustFail bool) {
			os.WriteFile(f.path, b, 0o600)
			got, err := read()
			switch {
			case err != nil && !errors.Is(err, fsutil.ErrDamaged):
				t.Fatalf("%s %s: error does not wrap ErrDamaged: %v", f.path, what, err)
			case err == nil && mustFail:
				t.Fatalf("%s %s: damage not detected", f.path, what)
			case err == nil && !reflect.DeepEqual(got, f.want):
				t.Fatalf("%s %s: read a different value without an error", f.path, what)
			}
		}
		for n := 0; n < len(good); n++ {
			check("cut", good[:n], true)
		}
		for i := range good {
			b := bytes.Clone(good)
			b[i] ^= 0x01
			check("flip", b, false)
		}
	}
	if err := CreateState(dir, state); !errors.Is(err, os.ErrExist) {
		t.Fatalf("a second CreateState: %v, want ErrExist", err)
	}
}
