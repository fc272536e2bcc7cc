package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The test binary doubles as a helper program (the os/exec test pattern): with
// CONCH_LEDGER_HELPER=append, TestMain appends records instead of running the tests.
func TestMain(m *testing.M) {
	if os.Getenv("CONCH_LEDGER_HELPER") == "append" {
		os.Exit(appendHelper(os.Args[len(os.Args)-4:]))
	}
	os.Exit(m.Run())
}

// appendHelper appends count records to the ledger in home once the file start exists.
// args: home, index, start, count.
func appendHelper(args []string) int {
	home, index, start := args[0], args[1], args[2]
	count, _ := strconv.Atoi(args[3])
	for {
		if _, err := os.Stat(start); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	l, err := Open(home, Options{RotateBytes: 16 << 10})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer l.Close()
	for i := range count {
		_, err := l.Append(Record{Type: TypeExec, Agent: "p" + index, Fields: map[string]any{
			"sessionId": fmt.Sprintf("p%s-%d", index, i), "argv": []string{"true"},
		}})
		if err != nil {
			fmt.Println(err)
			return 1
		}
	}
	return 0
}

func TestConcurrentAppendProcesses(t *testing.T) {
	const procs, each = 4, 200
	home := t.TempDir()
	start := filepath.Join(t.TempDir(), "go")
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$", home, strconv.Itoa(i), start, strconv.Itoa(each))
		cmd.Env = append(os.Environ(), "CONCH_LEDGER_HELPER=append")
		out := new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	os.WriteFile(start, nil, 0o600)
	deadline := time.AfterFunc(25*time.Second, func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	})
	defer deadline.Stop()
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, outs[i])
		}
	}

	rep, err := Verify(home)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Records != procs*each {
		t.Fatalf("verify: %s", rep)
	}
	t.Logf("%s", rep)
	if rep.Files < 2 {
		t.Fatalf("%d files; the test should rotate", rep.Files)
	}
	// Every helper's records are all there, in its own order.
	recs, err := Tail(home, 0, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	for _, r := range recs {
		sid := r.Fields.(map[string]any)["sessionId"].(string)
		if want := fmt.Sprintf("%s-%d", r.Agent, next[r.Agent]); sid != want {
			t.Fatalf("seq %d: %s, want %s", r.Seq, sid, want)
		}
		next[r.Agent]++
	}
	if len(next) != procs {
		t.Fatalf("agents %v", next)
	}
}

func BenchmarkAppend(b *testing.B) {
	l, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	code := 0
	rec := Record{Type: TypeEnd, Agent: "main", Fields: End{
		SessionID: "calm-gulf", State: "exited", ExitCode: &code, DurationMs: 1234,
		OutputBytes: 5678, OutputSHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	}}
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		if _, err := l.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "records/s")
}

func BenchmarkCanonical(b *testing.B) {
	data, _ := json.Marshal(map[string]any{
		"v": 1, "seq": 123456, "ts": "2026-01-02T03:04:05.678Z", "type": "evaluate", "agent": "main",
		"command": "git status | head -n 5", "envKeys": []string{"HOME", "PATH", "LANG"},
		"segments": []map[string]any{{"text": "git status", "exe": "/usr/bin/git", "verdict": "allowlist"}},
	})
	b.ReportAllocs()
	for range b.N {
		if _, err := Canonical(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendBatch appends the record of BenchmarkAppend in batches of
// 32, as the engine's ledger writer does under load; compare records/s.
func BenchmarkAppendBatch(b *testing.B) {
	l, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	code := 0
	rec := Record{Type: TypeEnd, Agent: "main", Fields: End{
		SessionID: "calm-gulf", State: "exited", ExitCode: &code, DurationMs: 1234,
		OutputBytes: 5678, OutputSHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	}}
	batch := make([]Record, 32)
	for i := range batch {
		batch[i] = rec
	}
	b.ResetTimer()
	t0 := time.Now()
	n := 0
	for n < b.N {
		k := min(len(batch), b.N-n)
		if _, err := l.AppendBatch(batch[:k]); err != nil {
			b.Fatal(err)
		}
		n += k
	}
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "records/s")
}
