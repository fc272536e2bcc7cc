package fsutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// sampleRecord has the shapes a state file holds: strings, numbers,
// pointers, lists, maps and a nested object.
type sampleRecord struct {
	State   string               `json:"state"`
	Code    *int                 `json:"exitCode"`
	Argv    []string             `json:"argv"`
	Cursors map[string]int64     `json:"cursors,omitempty"`
	Cgroup  *struct{ V2 string } `json:"cgroup,omitempty"`
	Final   bool                 `json:"final"`
	EndedAt int64                `json:"endedAt"`
}

// stateFiles are a sample of each kind of checksummed file: objects
// (checksummed), an empty object and a list (wrapped in an object).
func stateFiles() map[string]any {
	code := 3
	return map[string]any{
		"record.json": sampleRecord{State: "exited", Code: &code, Argv: []string{"/bin/sh", "-c", "make test"}, Cursors: map[string]int64{"main": 17},
			Cgroup: &struct{ V2 string }{V2: "/sys/fs/cgroup/conch-brisk-otter"}, Final: true, EndedAt: 1764547200000},
		"map.json":   map[string]any{"agent": "main", "backgrounded": true, "drainCursors": map[string]int64{"main": 17}},
		"empty.json": struct{}{},
		"list.json":  []string{"a", "b"},
	}
}

// TestJSONDamage generates every one-byte change (two different flips per
// offset) and every truncation of each file: ReadJSON either reports
// ErrDamaged or returns exactly what was written. It never returns a
// different value without an error. Truncations of an object are always
// caught, and so is every flip that changes the value.
func TestJSONDamage(t *testing.T) {
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

// TestJSONLegacy: a file an earlier conch wrote (no checksum member) is
// still read, and one cut short is still caught.
func TestJSONLegacy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exit.json")
	code := 3
	b, _ := json.MarshalIndent(sampleRecord{State: "exited", Code: &code, Final: true}, "", "  ")
	os.WriteFile(path, append(b, '\n'), 0o600)
	var e sampleRecord
	if err := ReadJSON(path, &e); err != nil || e.Code == nil || *e.Code != 3 {
		t.Fatalf("legacy file: %+v, %v", e, err)
	}
	os.WriteFile(path, b[:len(b)/2], 0o600)
	if err := ReadJSON(path, &e); !errors.Is(err, ErrDamaged) {
		t.Fatalf("legacy file cut short: %v", err)
	}
}

// TestCreateJSONExclusive: CreateJSON refuses an existing file and leaves
// it alone.
func TestCreateJSONExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := CreateJSON(path, map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := CreateJSON(path, map[string]int{"a": 2}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second create: %v, want ErrExist", err)
	}
	var m map[string]int
	if err := ReadJSON(path, &m); err != nil || m["a"] != 1 {
		t.Fatalf("after refused create: %v, %v", m, err)
	}
}
