package approvals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as a helper program (the os/exec test pattern): with
// CONCH_APPROVALS_HELPER set, TestMain runs the helper named there instead of the tests.
func TestMain(m *testing.M) {
	if name := os.Getenv("CONCH_APPROVALS_HELPER"); name != "" {
		os.Exit(helper(name, os.Args[len(os.Args)-3:]))
	}
	os.Exit(m.Run())
}

// helper runs one helper: args are home, the helper's index and a go-file whose appearance
// starts the work (so that all helpers start together).
func helper(name string, args []string) int {
	home, index, start := args[0], args[1], args[2]
	for {
		if _, err := os.Stat(start); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	switch name {
	case "update":
		for j := range updatesPerProcess {
			pattern := fmt.Sprintf("/opt/p%s/bin/t%d", index, j)
			_, err := Update(home, func(f *File) error {
				a := f.Agents["main"]
				if a == nil {
					a = &Agent{}
					f.Agents["main"] = a
				}
				a.Allowlist = append(a.Allowlist, Entry{Pattern: pattern})
				return nil
			})
			if err != nil {
				fmt.Println("error:", err)
				return 1
			}
		}
		fmt.Println("ok")
	case "decide":
		s, err := OpenStore(home)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		ids, _ := os.ReadFile(filepath.Join(home, "target"))
		var won int
		for _, id := range strings.Fields(string(ids)) {
			_, err = s.Decide(id, Deny, "p"+index)
			switch {
			case err == nil:
				won++
			case errors.Is(err, ErrAlreadyResolved):
			default:
				fmt.Println("error:", err)
				return 1
			}
		}
		fmt.Println("won", won)
	default:
		fmt.Println("unknown helper", name)
		return 2
	}
	return 0
}

const (
	helperProcs       = 6
	updatesPerProcess = 15
)

// runHelpers starts n helper processes, releases them at once and returns their outputs.
func runHelpers(t *testing.T, name, home string, n int) []string {
	t.Helper()
	start := filepath.Join(t.TempDir(), "go")
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$", home, strconv.Itoa(i), start)
		cmd.Env = append(os.Environ(), "CONCH_APPROVALS_HELPER="+name)
		outs[i] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		cmd.WaitDelay = time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	if err := os.WriteFile(start, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.AfterFunc(20*time.Second, func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	})
	defer deadline.Stop()
	res := make([]string, n)
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("helper %d: %v\n%s", i, err, outs[i])
		}
		res[i] = strings.TrimSpace(outs[i].String())
	}
	return res
}

func TestConcurrentUpdateProcesses(t *testing.T) {
	home := t.TempDir()
	writeFile(t, home, `{"version":1,"socket":{"path":"keep-me"}}`)
	runHelpers(t, "update", home, helperProcs)

	data, err := os.ReadFile(Path(home))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(data) {
		t.Fatalf("corrupt file:\n%s", data)
	}
	f, err := Load(home)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range f.Agents["main"].Allowlist {
		if got[e.Pattern] {
			t.Errorf("duplicate %s", e.Pattern)
		}
		got[e.Pattern] = true
	}
	if want := helperProcs * updatesPerProcess; len(got) != want {
		t.Fatalf("%d entries, want %d: lost updates", len(got), want)
	}
	var socket bytes.Buffer
	json.Compact(&socket, f.Extra["socket"])
	if socket.String() != `{"path":"keep-me"}` {
		t.Fatalf("unknown member lost: %s", f.Extra["socket"])
	}
	if left, _ := filepath.Glob(filepath.Join(home, ".*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestConcurrentDecideProcesses(t *testing.T) {
	home := t.TempDir()
	s, err := OpenStore(home)
	if err != nil {
		t.Fatal(err)
	}
	const approvals = 20
	var ids []string
	for range approvals {
		r, err := s.Create(Request{Agent: "main", Command: "rm -rf build"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Slug)
	}
	os.WriteFile(filepath.Join(home, "target"), []byte(strings.Join(ids, "\n")), 0o600)

	total := 0
	for _, out := range runHelpers(t, "decide", home, helperProcs) {
		var n int
		if _, err := fmt.Sscanf(out, "won %d", &n); err != nil {
			t.Fatalf("helper output %q", out)
		}
		total += n
	}
	if total != approvals {
		t.Fatalf("%d decisions won for %d approvals; want exactly one each", total, approvals)
	}
	list, err := s.List("")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		if r.State != Denied || !strings.HasPrefix(r.DecidedBy, "p") {
			t.Fatalf("record %+v", r)
		}
	}
}
