package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func openLedger(t *testing.T, home string, opts Options) *Ledger {
	t.Helper()
	l, err := Open(home, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appendN appends n records of assorted types.
func appendN(t testing.TB, l *Ledger, n int) []Record {
	t.Helper()
	var out []Record
	for i := range n {
		var r Record
		switch i % 3 {
		case 0:
			r = Record{Type: TypeEvaluate, Agent: "main", Fields: Evaluate{
				RequestID: fmt.Sprintf("req%d", i), Host: "gateway", Command: "git status | head -n 5",
				Cwd: "/w", EnvKeys: []string{"HOME"}, Security: "allowlist", Ask: "on-miss",
				AskFallback: "deny", Analysis: "ok", Outcome: "run",
				Segments: []Segment{{Text: "git status", Exe: "/usr/bin/git", Verdict: "allowlist"}},
			}}
		case 1:
			r = Record{Type: TypeExec, Agent: "main", Fields: map[string]any{
				"requestId": fmt.Sprintf("req%d", i-1), "sessionId": fmt.Sprintf("s%d", i),
				"argv": []string{"git", "status"}, "timeoutMs": 1800000, "pty": false,
			}}
		default:
			code := 0
			r = Record{Type: TypeEnd, Agent: "ops", Fields: End{SessionID: fmt.Sprintf("s%d", i-1), State: "exited", ExitCode: &code, OutputSHA256: "ab"}}
		}
		got, err := l.Append(r)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		out = append(out, got)
	}
	return out
}

func TestAppendChain(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	l := openLedger(t, home, Options{})
	recs := appendN(t, l, 5)

	tsRE := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	data, err := os.ReadFile(filepath.Join(Dir(home), "ledger-000001.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines", len(lines))
	}
	prev := ZeroHash
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m["v"] != 1.0 || m["seq"] != float64(i+1) || m["prev"] != prev || !tsRE.MatchString(m["ts"].(string)) {
			t.Fatalf("line %d: %s", i+1, line)
		}
		// hash = sha256 of the canonical record without hash; the line is canonical.
		canon, _ := Canonical([]byte(line))
		if string(canon) != line {
			t.Fatalf("line %d is not canonical:\n%s\n%s", i+1, line, canon)
		}
		delete(m, "hash")
		b, _ := json.Marshal(m)
		canon, _ = Canonical(b)
		sum := sha256.Sum256(canon)
		if h := hex.EncodeToString(sum[:]); h != recs[i].Hash {
			t.Fatalf("line %d hash %s, Append said %s", i+1, h, recs[i].Hash)
		}
		if recs[i].Seq != int64(i+1) || recs[i].Prev != prev || recs[i].V != 1 {
			t.Fatalf("returned record %+v", recs[i])
		}
		prev = recs[i].Hash
	}
	if !strings.Contains(lines[1], `"argv":["git","status"]`) || !strings.Contains(lines[0], `"segments":[{`) {
		t.Fatalf("fields not flattened: %s", lines[:2])
	}

	for path, mode := range map[string]os.FileMode{
		Dir(home): 0o700,
		filepath.Join(Dir(home), "ledger-000001.jsonl"): 0o600,
		filepath.Join(Dir(home), "HEAD"):                0o600,
		filepath.Join(Dir(home), ".lock"):               0o600,
	} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v %v, want %v", path, st.Mode().Perm(), err, mode)
		}
	}

	rep, err := Verify(home)
	if err != nil {
		t.Fatal(err)
	}
	// The exec record above has no end record: its session is open.
	want := fmt.Sprintf("ok: 5 records in 1 files; head %s; 1 sessions open", recs[4].Hash)
	if !rep.OK || rep.String() != want {
		t.Fatalf("verify: %s, want %s", rep, want)
	}
	js, _ := json.Marshal(rep)
	if !strings.HasPrefix(string(js), fmt.Sprintf(`{"ok":true,"records":5,"files":1,"head":"%s","signed":"home","checkpoint":"5:%s:`, recs[4].Hash, recs[4].Hash)) {
		t.Fatalf("report JSON %s", js)
	}
}

func TestAppendRejects(t *testing.T) {
	l := openLedger(t, t.TempDir(), Options{})
	for _, r := range []Record{
		{Type: "bogus"},
		{Type: TypeExec, Fields: map[string]any{"seq": 9}},
		{Type: TypeExec, Fields: map[string]any{"hash": "x"}},
		{Type: TypeExec, Fields: []string{"x"}},
		{Type: TypeExec, Fields: 3},
		{Type: TypeExec, Fields: map[string]any{"f": func() {}}},
	} {
		if _, err := l.Append(r); err == nil {
			t.Errorf("Append(%+v) succeeded", r)
		}
	}
	if r, err := l.Append(Record{Type: TypeNode}); err != nil || r.Seq != 1 {
		t.Fatalf("nil fields: %+v %v", r, err)
	}
	l.Close()
	if _, err := l.Append(Record{Type: TypeNode}); err == nil {
		t.Fatal("append after close succeeded")
	}
}

func TestRotation(t *testing.T) {
	home := t.TempDir()
	l := openLedger(t, home, Options{RotateBytes: 1000})
	recs := appendN(t, l, 40)
	files, _ := listFiles(Dir(home))
	if len(files) < 5 {
		t.Fatalf("%d files, want several", len(files))
	}
	for i, name := range files {
		if name != fileName(i+1) {
			t.Fatalf("file %d is %s", i, name)
		}
		st, _ := os.Stat(filepath.Join(Dir(home), name))
		if i < len(files)-1 && st.Size() > 1000 {
			t.Fatalf("%s has %d bytes", name, st.Size())
		}
	}
	rep, err := Verify(home)
	if err != nil || !rep.OK || rep.Records != 40 || rep.Files != len(files) || rep.Head != recs[39].Hash {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	// A new Ledger continues the chain.
	l2 := openLedger(t, home, Options{RotateBytes: 1000})
	r, err := l2.Append(Record{Type: TypePolicy, Agent: "", Fields: Policy{File: "exec-approvals.json", By: "operator"}})
	if err != nil || r.Seq != 41 || r.Prev != recs[39].Hash {
		t.Fatalf("continued: %+v %v", r, err)
	}
}

// lines returns the lines (with newlines) of the ledger's first file.
func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(data, []byte("\n"))[:bytes.Count(data, []byte("\n"))]
}

func writeLines(t *testing.T, path string, lines [][]byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

// rehash returns line with its hash recomputed, as a forger would.
func rehash(t *testing.T, line []byte) []byte {
	v, _ := decode(line)
	m := v.(map[string]any)
	h, err := recordHash(m)
	if err != nil {
		t.Fatal(err)
	}
	m["hash"] = h
	var b bytes.Buffer
	writeCanonical(&b, m)
	return append(b.Bytes(), '\n')
}

func TestVerifyDetectsTampering(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tamper   func(t *testing.T, dir string, lines [][]byte) [][]byte
		brokenAt int64
		where    string
		reason   string
	}{
		{"edited", func(t *testing.T, dir string, l [][]byte) [][]byte {
			l[3] = bytes.Replace(l[3], []byte(`"main"`), []byte(`"root"`), 1)
			return l
		}, 4, "ledger-000001.jsonl:4", "hash mismatch"},
		{"edited and rehashed", func(t *testing.T, dir string, l [][]byte) [][]byte {
			l[3] = rehash(t, bytes.Replace(l[3], []byte(`"main"`), []byte(`"root"`), 1))
			return l
		}, 5, "ledger-000001.jsonl:5", "prev does not match the hash of seq 4"},
		{"removed", func(t *testing.T, dir string, l [][]byte) [][]byte {
			return append(l[:2:2], l[3:]...)
		}, 3, "ledger-000001.jsonl:3", "expected seq 3, found seq 4"},
		{"reordered", func(t *testing.T, dir string, l [][]byte) [][]byte {
			l[5], l[6] = l[6], l[5]
			return l
		}, 6, "ledger-000001.jsonl:6", "expected seq 6, found seq 7"},
		{"inserted", func(t *testing.T, dir string, l [][]byte) [][]byte {
			return append(l[:4:4], append([][]byte{l[1]}, l[4:]...)...)
		}, 5, "ledger-000001.jsonl:5", "expected seq 5, found seq 2"},
		{"first removed", func(t *testing.T, dir string, l [][]byte) [][]byte {
			return l[1:]
		}, 1, "ledger-000001.jsonl:1", "expected seq 1, found seq 2"},
		{"torn", func(t *testing.T, dir string, l [][]byte) [][]byte {
			l[9] = l[9][:len(l[9])/2]
			return l
		}, 10, "ledger-000001.jsonl:10", "torn record"},
		{"truncated", func(t *testing.T, dir string, l [][]byte) [][]byte {
			return l[:8]
		}, 9, "ledger-000001.jsonl:9", "truncated: HEAD is at seq 10, the last record is seq 8"},
		{"garbage line", func(t *testing.T, dir string, l [][]byte) [][]byte {
			l[2] = []byte("hello\n")
			return l
		}, 3, "ledger-000001.jsonl:3", "unparsable record"},
		{"blank line", func(t *testing.T, dir string, l [][]byte) [][]byte {
			return append(l[:2:2], append([][]byte{[]byte("\n")}, l[2:]...)...)
		}, 3, "ledger-000001.jsonl:3", "unparsable record"},
		{"HEAD missing", func(t *testing.T, dir string, l [][]byte) [][]byte {
			os.Remove(filepath.Join(dir, "HEAD"))
			return l
		}, 10, "HEAD", "HEAD missing"},
		{"HEAD garbage", func(t *testing.T, dir string, l [][]byte) [][]byte {
			os.WriteFile(filepath.Join(dir, "HEAD"), []byte("nope"), 0o600)
			return l
		}, 10, "HEAD", "HEAD unreadable"},
		{"HEAD forged", func(t *testing.T, dir string, l [][]byte) [][]byte {
			h, _, _ := readHead(dir)
			h.Hash = strings.Repeat("1", 64)
			writeHead(dir, h, nil)
			return l
		}, 10, "HEAD", "HEAD does not match seq 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			l := openLedger(t, home, Options{})
			appendN(t, l, 10)
			path := filepath.Join(Dir(home), fileName(1))
			writeLines(t, path, tc.tamper(t, Dir(home), readLines(t, path)))
			rep, err := Verify(home)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.BrokenAt != tc.brokenAt || !strings.Contains(rep.Reason, tc.reason) {
				t.Fatalf("report %+v; want broken at %d: %s", rep, tc.brokenAt, tc.reason)
			}
			want := fmt.Sprintf("broken at seq %d (%s): ", tc.brokenAt, tc.where)
			if !strings.HasPrefix(rep.String(), want) {
				t.Fatalf("text %q, want prefix %q", rep, want)
			}
		})
	}
}

func TestVerifyAcrossFiles(t *testing.T) {
	home := t.TempDir()
	l := openLedger(t, home, Options{RotateBytes: 1000})
	appendN(t, l, 40)
	files, _ := listFiles(Dir(home))
	// The first record of the third file.
	first := readLines(t, filepath.Join(Dir(home), files[2]))[0]
	v, _ := decode(first)
	seq := seqOf(v.(map[string]any))
	os.Remove(filepath.Join(Dir(home), files[1]))
	rep, err := Verify(home)
	if err != nil {
		t.Fatal(err)
	}
	prevLines := len(readLines(t, filepath.Join(Dir(home), files[0])))
	if rep.OK || rep.BrokenAt != int64(prevLines+1) || rep.File != files[2] || rep.Line != 1 ||
		rep.Reason != fmt.Sprintf("expected seq %d, found seq %d (records missing, reordered or inserted)", prevLines+1, seq) {
		t.Fatalf("report %+v", rep)
	}
	// The last file removed: HEAD notices.
	home2 := t.TempDir()
	l2 := openLedger(t, home2, Options{RotateBytes: 1000})
	appendN(t, l2, 40)
	files, _ = listFiles(Dir(home2))
	os.Remove(filepath.Join(Dir(home2), files[len(files)-1]))
	rep, _ = Verify(home2)
	if rep.OK || !strings.Contains(rep.Reason, "truncated: HEAD is at seq 40") {
		t.Fatalf("report %+v", rep)
	}
	if _, err := l2.Append(Record{Type: TypeNode}); !errors.Is(err, ErrBroken) {
		t.Fatalf("append to a broken ledger: %v", err)
	}
}

func TestVerifyEmpty(t *testing.T) {
	home := t.TempDir()
	rep, err := Verify(home)
	if err != nil || rep.String() != "ok: 0 records in 0 files; head "+ZeroHash {
		t.Fatalf("%s %v", rep, err)
	}
	if _, err := os.Stat(Dir(home)); !os.IsNotExist(err) {
		t.Fatal("Verify created the ledger directory")
	}
}

func TestRecovery(t *testing.T) {
	home := t.TempDir()
	dir := Dir(home)
	l := openLedger(t, home, Options{})
	appendN(t, l, 3)
	oldHead, _ := os.ReadFile(filepath.Join(dir, "HEAD"))
	recs := appendN(t, l, 2)
	path := filepath.Join(dir, fileName(1))

	// A crash between a record's fsync and HEAD's update: HEAD lags, which is not damage.
	os.WriteFile(filepath.Join(dir, "HEAD"), oldHead, 0o600)
	if rep, _ := Verify(home); !rep.OK || rep.Records != 5 {
		t.Fatalf("lagging HEAD: %s", rep)
	}
	// A torn write after it: Verify reports it; Append drops it and carries on.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"agent":"main","hash":"`)
	f.Close()
	if rep, _ := Verify(home); rep.OK || rep.BrokenAt != 6 || !strings.Contains(rep.Reason, "torn") {
		t.Fatalf("torn: %s", rep)
	}
	r, err := l.Append(Record{Type: TypeNode, Fields: Node{Action: "pair", NodeID: "n1"}})
	if err != nil || r.Seq != 6 || r.Prev != recs[1].Hash {
		t.Fatalf("append after crash: %+v %v", r, err)
	}
	if rep, _ := Verify(home); !rep.OK || rep.Records != 6 || rep.Head != r.Hash {
		t.Fatalf("after recovery: %s", rep)
	}

	// HEAD lost (and a torn tail): rebuilt from the last record.
	os.Remove(filepath.Join(dir, "HEAD"))
	f, _ = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"v":1`)
	f.Close()
	// (A missing HEAD vouches for nothing: a gap record says the end was rebuilt.)
	r2, err := l.Append(Record{Type: TypeNode})
	if err != nil || r2.Seq != 8 {
		t.Fatalf("append without HEAD: %+v %v", r2, err)
	}
	if rep, _ := Verify(home); !rep.OK || rep.Records != 8 || len(rep.Gaps) != 1 || rep.Gaps[0].Seq != 7 ||
		!strings.HasPrefix(rep.Gaps[0].Reason, "HEAD missing: rebuilt from the log at seq 6") {
		t.Fatalf("after HEAD rebuild: %s", rep)
	}

	// Records after HEAD that do not continue the chain: refuse.
	lines := readLines(t, path)
	os.WriteFile(filepath.Join(dir, "HEAD"), oldHead, 0o600)
	lines[3] = rehash(t, bytes.Replace(lines[3], []byte(`"main"`), []byte(`"xx"`), 1))
	writeLines(t, path, lines)
	if _, err := l.Append(Record{Type: TypeNode}); !errors.Is(err, ErrBroken) {
		t.Fatalf("append after a forged record: %v", err)
	}
	// A file shorter than HEAD says: refuse.
	home2 := t.TempDir()
	l2 := openLedger(t, home2, Options{})
	appendN(t, l2, 3)
	p2 := filepath.Join(Dir(home2), fileName(1))
	writeLines(t, p2, readLines(t, p2)[:2])
	if _, err := l2.Append(Record{Type: TypeNode}); !errors.Is(err, ErrBroken) || !strings.Contains(err.Error(), "shorter than HEAD") {
		t.Fatalf("append after truncation: %v", err)
	}
}

func TestTail(t *testing.T) {
	home := t.TempDir()
	if recs, err := Tail(home, 5, Filter{}); err != nil || len(recs) != 0 {
		t.Fatalf("empty: %v %v", recs, err)
	}
	l := openLedger(t, home, Options{RotateBytes: 700})
	add := func(typ, agent string, f any) {
		if _, err := l.Append(Record{Type: typ, Agent: agent, Fields: f}); err != nil {
			t.Fatal(err)
		}
	}
	// Two flows: an approved one (req1 → a1 → s1) and a direct run (req2 → s2).
	add(TypeEvaluate, "main", map[string]any{"requestId": "req1", "command": "curl x", "outcome": "prompt"})
	add(TypeRequest, "main", Request{RequestID: "req1", ApprovalID: "a1-uuid", Slug: "a1", Routes: []string{"sse"}})
	add(TypeEvaluate, "ops", map[string]any{"requestId": "req2", "command": "ls", "outcome": "run"})
	add(TypeExec, "ops", Exec{RequestID: "req2", SessionID: "s2", Argv: []string{"ls"}})
	add(TypeDecision, "main", Decision{ApprovalID: "a1-uuid", Decision: "allow-once", DecidedBy: "operator"})
	add(TypeExec, "main", Exec{RequestID: "req1", ApprovalID: "a1-uuid", SessionID: "s1", Argv: []string{"curl", "x"}})
	add(TypeEnd, "ops", map[string]any{"sessionId": "s2", "state": "exited", "exitCode": 0})
	add(TypeEnd, "main", map[string]any{"sessionId": "s1", "state": "exited", "exitCode": 7})

	seqs := func(recs []Record) []int64 {
		var s []int64
		for _, r := range recs {
			s = append(s, r.Seq)
		}
		return s
	}
	for _, tc := range []struct {
		n    int
		f    Filter
		want []int64
	}{
		{0, Filter{}, []int64{1, 2, 3, 4, 5, 6, 7, 8}},
		{3, Filter{}, []int64{6, 7, 8}},
		{0, Filter{Since: 6}, []int64{7, 8}},
		{0, Filter{Agent: "ops"}, []int64{3, 4, 7}},
		{0, Filter{Session: "s1"}, []int64{1, 2, 5, 6, 8}},
		{0, Filter{Session: "s2"}, []int64{3, 4, 7}},
		{0, Filter{Approval: "a1"}, []int64{1, 2, 5, 6, 8}},
		{2, Filter{Approval: "a1-uuid"}, []int64{6, 8}},
		{0, Filter{Approval: "nope"}, nil},
	} {
		recs, err := Tail(home, tc.n, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqs(recs); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Tail(%d, %+v) = %v, want %v", tc.n, tc.f, got, tc.want)
		}
	}

	recs, _ := Tail(home, 1, Filter{})
	r := recs[0]
	if r.V != 1 || r.Type != TypeEnd || r.Agent != "main" || r.Fields.(map[string]any)["exitCode"] != json.Number("7") || r.TS.IsZero() {
		t.Fatalf("record %+v", r)
	}
	line := r.String()
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z #8 end main session=s1 exited exit=7$`).MatchString(line) {
		t.Fatalf("line %q", line)
	}
	// Record round-trips through its JSON form, which is the line on disk.
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := listFiles(Dir(home))
	last := readLines(t, filepath.Join(Dir(home), files[len(files)-1]))
	if want := last[len(last)-1]; string(js)+"\n" != string(want) {
		t.Fatalf("MarshalJSON\n%s\nline\n%s", js, want)
	}
	var back Record
	if err := json.Unmarshal(js, &back); err != nil || back.Hash != r.Hash || back.Seq != 8 {
		t.Fatalf("unmarshal: %+v %v", back, err)
	}

	// An append in progress (incomplete last line) is skipped.
	f, _ := os.OpenFile(filepath.Join(Dir(home), files[len(files)-1]), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"v":1,"seq":9`)
	f.Close()
	if recs, err := Tail(home, 0, Filter{}); err != nil || len(recs) != 8 {
		t.Fatalf("with a torn line: %d %v", len(recs), err)
	}
}

// TestAppendBatch: a batch continues the chain like single appends, rotates
// files in the middle, and verifies; a batch with a bad record writes
// nothing.
func TestAppendBatch(t *testing.T) {
	home := t.TempDir()
	l := openLedger(t, home, Options{RotateBytes: 700})
	first := appendN(t, l, 2)
	var batch []Record
	for i := range 9 {
		batch = append(batch, Record{Type: TypeNode, Agent: "main", Fields: map[string]any{"action": "pair", "nodeId": fmt.Sprintf("node-%d", i), "name": strings.Repeat("n", 40), "by": "test"}})
	}
	got, err := l.AppendBatch(batch)
	if err != nil || len(got) != len(batch) {
		t.Fatalf("AppendBatch: %d records, %v", len(got), err)
	}
	prev := first[len(first)-1].Hash
	for i, r := range got {
		if r.Seq != int64(3+i) || r.Prev != prev || r.Hash == "" {
			t.Fatalf("record %d: seq %d prev %.8s (want %d, %.8s)", i, r.Seq, r.Prev, 3+i, prev)
		}
		prev = r.Hash
	}
	files, _ := listFiles(Dir(home))
	if len(files) < 3 {
		t.Fatalf("a 700-byte rotation left %d files: %v", len(files), files)
	}
	if _, err := l.AppendBatch([]Record{{Type: TypeNode, Fields: map[string]any{"action": "x"}}, {Type: "bogus"}}); err == nil {
		t.Fatal("a batch with an unknown type was accepted")
	}
	tail := appendN(t, l, 1)
	if tail[0].Seq != 12 || tail[0].Prev != prev {
		t.Fatalf("after the batch: seq %d prev %.8s, want 12 %.8s", tail[0].Seq, tail[0].Prev, prev)
	}
	rep, err := Verify(home)
	if err != nil || !rep.OK || rep.Records != 12 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	recs, err := Tail(home, 100, Filter{})
	if err != nil || len(recs) != 12 {
		t.Fatalf("tail: %d %v", len(recs), err)
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Fatalf("tail[%d] seq %d", i, r.Seq)
		}
	}
}

// TestHeadRewrittenInPlace: HEAD is rewritten in place, padded, and an
// unreadable or longer HEAD left by a crash or an older version is
// replaced whole by the next Append.
func TestHeadRewrittenInPlace(t *testing.T) {
	home := t.TempDir()
	l := openLedger(t, home, Options{})
	appendN(t, l, 3)
	path := filepath.Join(Dir(home), "HEAD")
	before, _ := os.Stat(path)
	if before.Size() != headSize {
		t.Fatalf("HEAD is %d bytes, want %d", before.Size(), headSize)
	}
	os.WriteFile(path, bytes.Repeat([]byte("x"), 3*headSize), 0o600)
	appendN(t, l, 1) // after a gap record saying HEAD was unreadable
	h, ok, err := readHead(Dir(home))
	if !ok || err != nil || h.Seq != 5 {
		t.Fatalf("HEAD after a garbage HEAD: %+v %v %v", h, ok, err)
	}
	after, _ := os.Stat(path)
	if after.Size() != headSize || !os.SameFile(before, after) {
		t.Fatalf("HEAD was replaced or kept stale bytes: %d bytes, same file %v", after.Size(), os.SameFile(before, after))
	}
	if rep, err := Verify(home); err != nil || !rep.OK {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
