package e2etest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Log is the stderr of a conch process a test started (and of the
// processes it starts in turn, which inherit it), kept in a file in the
// test's temp dir rather than printed: the warnings a test provokes on
// purpose (a damaged state file, a full disk) are the test's to check
// (Records), and a run of the suite prints only its results. The cleanup
// of a failed test logs the whole file, so nothing is lost for debugging.
//
// A file, not a pipe: a supervisor the process leaves behind holds its
// stderr open, and a pipe would keep the test's Wait waiting on it.
type Log struct {
	path string
}

// NewLog creates the stderr file of a process (name says which, in the
// failure log) and returns it with the open file to give its exec.Cmd.
// The test's cleanup closes the file and, if the test failed, logs what
// it holds. Call it before the cleanup that stops the process is
// registered, so that the log is read after the process is gone.
func NewLog(t testing.TB, name string) (*Log, *os.File) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr-*.log")
	if err != nil {
		t.Fatal(err)
	}
	l := &Log{path: f.Name()}
	t.Cleanup(func() {
		f.Close()
		if t.Failed() {
			if s := l.String(); s != "" {
				t.Logf("stderr of %s:\n%s", name, s)
			}
		}
	})
	return l, f
}

// Path is the log file's path.
func (l *Log) Path() string { return l.path }

// String returns what the process has written so far.
func (l *Log) String() string {
	b, _ := os.ReadFile(l.path)
	return string(b)
}

// Records returns the log records (lines, in slog's text format) whose
// message is msg, in order.
func (l *Log) Records(msg string) []string {
	var out []string
	want := "msg=" + quoteLogValue(msg)
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, " "+want+" ") || strings.HasSuffix(line, " "+want) {
			out = append(out, line)
		}
	}
	return out
}

// DamageRecords returns the "damaged state file" warnings of the log by
// the damaged file's path (the engine reports each damaged file once),
// each with its kind (meta, state, exit, journal, idempotency).
func (l *Log) DamageRecords() map[string]string {
	out := map[string]string{}
	for _, r := range l.Records("damaged state file") {
		out[filepath.Clean(logField(r, "path"))] = logField(r, "kind")
	}
	return out
}

// quoteLogValue quotes s the way slog's text handler does for a value
// with spaces or quotes.
func quoteLogValue(s string) string {
	if strings.ContainsAny(s, " =\"") {
		return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
	}
	return s
}

// logField returns the (unquoted) value of key in a slog text record, ""
// when it has none. Values are quoted when they hold spaces; paths in the
// tests' temp dirs do not.
func logField(record, key string) string {
	i := strings.Index(record, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := record[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		end := 1
		for end < len(v) && (v[end] != '"' || v[end-1] == '\\') {
			end++
		}
		return strings.ReplaceAll(v[1:min(end, len(v))], `\"`, `"`)
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}
