package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// realTree builds real directories with real executable files:
//
//	root/trusted/head     a copy of /usr/bin/head (or a stand-in)
//	root/untrusted/head   the same
//	root/untrusted/link   symlink → /usr/bin/head
//	root/trusted/evil     symlink → root/untrusted/head
//	root/proj/tool, root/proj/data (not executable), root/proj/dir/ (a directory)
//	root/proj/ln          symlink → root/other/deep
//	root/other/tool2
func realTree(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	content := []byte("#!/bin/sh\nexit 0\n")
	if b, err := os.ReadFile("/usr/bin/head"); err == nil {
		content = b
	}
	mk := func(p string, mode os.FileMode, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, target string) {
		t.Helper()
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	mk(root+"/trusted/head", 0o755, content)
	mk(root+"/untrusted/head", 0o755, content)
	if _, err := os.Stat("/usr/bin/head"); err == nil {
		link(root+"/untrusted/link", "/usr/bin/head")
	}
	link(root+"/trusted/evil", root+"/untrusted/head")
	mk(root+"/proj/tool", 0o755, []byte("x"))
	mk(root+"/proj/data", 0o644, []byte("x"))
	if err := os.MkdirAll(root+"/proj/dir", 0o755); err != nil {
		t.Fatal(err)
	}
	mk(root+"/other/deep/x", 0o644, nil)
	mk(root+"/other/tool2", 0o755, []byte("y"))
	mk(root+"/tool2", 0o755, []byte("z"))
	link(root+"/proj/ln", root+"/other/deep")
	return root
}

func realSegment(t *testing.T, req Request) Segment {
	t.Helper()
	d := Evaluate(req)
	if !d.Analysis.OK {
		t.Fatalf("%q: %s", req.Command, d.Analysis.Reason)
	}
	return d.Analysis.Parts[0].Segments[0]
}

// TestRealTrustedDirs: a head in an untrusted directory is not a safe bin
// (only trusted directories hold safe bins), on the real filesystem.
func TestRealTrustedDirs(t *testing.T) {
	root := realTree(t)
	req := func(cmd, path string, trusted ...string) Request {
		return Request{Command: cmd, Security: SecurityAllowlist, Ask: AskOnMiss, TrustedDirs: trusted,
			Env: Env{PATH: path, Cwd: root, Home: root}}
	}
	// found first on PATH in an untrusted directory
	s := realSegment(t, req("head -n 5", root+"/untrusted:"+root+"/trusted", root+"/trusted"))
	if s.Verdict != VerdictMiss || s.Exe != root+"/untrusted/head" {
		t.Errorf("untrusted head: %+v", s)
	}
	// the same file in a trusted directory
	s = realSegment(t, req("head -n 5", root+"/trusted:"+root+"/untrusted", root+"/trusted"))
	if s.Verdict != VerdictSafeBins || s.Exe != root+"/trusted/head" || s.RealPath != root+"/trusted/head" {
		t.Errorf("trusted head: %+v", s)
	}
	// a trusted dir given with a trailing slash and via ~
	s = realSegment(t, req("head -n 5", root+"/trusted", "~/trusted/"))
	if s.Verdict != VerdictSafeBins {
		t.Errorf("~ trusted dir: %+v", s)
	}
	// without the trusted dir
	s = realSegment(t, req("head -n 5", root+"/trusted"))
	if s.Verdict != VerdictMiss {
		t.Errorf("head without trusted dirs: %+v", s)
	}
	// PATH entries are never trusted implicitly, even when the file is a
	// symlink to the real /usr/bin/head
	if _, err := os.Stat(root + "/untrusted/link"); err == nil {
		s = realSegment(t, req(root+"/untrusted/link -n 5", ""))
		if s.Verdict != VerdictMiss || s.RealPath != mustReal(t, "/usr/bin/head") {
			t.Errorf("symlink to /usr/bin/head: %+v", s)
		}
	}
	// a symlink in a trusted dir to an untrusted file
	s = realSegment(t, req("evil -n 5", root+"/trusted", root+"/trusted"))
	if s.Verdict != VerdictMiss || s.RealPath != root+"/untrusted/head" {
		t.Errorf("trusted symlink to untrusted file: %+v", s)
	}
	// the real /usr/bin/head is a safe bin with the built-in trusted dirs
	if _, err := os.Stat("/usr/bin/head"); err == nil {
		s = realSegment(t, req("head -n 5", "/usr/bin"))
		if s.Verdict != VerdictSafeBins {
			t.Errorf("/usr/bin/head: %+v", s)
		}
		s = realSegment(t, req("/bin/head -n 5", ""))
		if s.Verdict != VerdictSafeBins {
			t.Errorf("/bin/head: %+v", s)
		}
	}
}

func mustReal(t *testing.T, p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRealResolution(t *testing.T) {
	root := realTree(t)
	tests := []struct {
		cmd, path, exe, real string
	}{
		{"tool", root + "/proj", root + "/proj/tool", root + "/proj/tool"},
		{"./tool", "", root + "/proj/tool", root + "/proj/tool"},
		{root + "/proj/tool", "", root + "/proj/tool", root + "/proj/tool"},
		// non-executable files and directories are skipped on PATH
		{"data", root + "/proj", "", ""},
		{"dir", root + "/proj", "", ""},
		{"./data", "", "", ""},
		// ".." after a symlink is physical: ln/../tool2 is other/tool2
		{"./ln/../tool2", "", root + "/other/tool2", root + "/other/tool2"},
		{"../tool2", "", root + "/tool2", root + "/tool2"},
		{"~/proj/tool", "", root + "/proj/tool", root + "/proj/tool"},
		{"nosuch", root + "/proj", "", ""},
	}
	for _, tt := range tests {
		req := Request{Command: tt.cmd, Env: Env{PATH: tt.path, Cwd: root + "/proj", Home: root}}
		s := realSegment(t, req)
		if s.Exe != tt.exe || s.RealPath != tt.real {
			t.Errorf("%q: exe %q real %q (%s), want %q %q", tt.cmd, s.Exe, s.RealPath, s.Rule, tt.exe, tt.real)
		}
	}
	// an allowlisted ./ln/../tool2 must not be taken for proj/tool2
	req := Request{Command: "./ln/../tool2", Allowlist: []AllowEntry{{Pattern: root + "/proj/*"}},
		Env: Env{Cwd: root + "/proj", Home: root}}
	if d := Evaluate(req); d.Outcome == OutcomeRun {
		t.Errorf("lexical .. matched: %+v", d.Analysis.Parts[0].Segments[0])
	}
}

func TestRealAllowlistRealpath(t *testing.T) {
	root := realTree(t)
	// a literal pattern naming a symlink matches the file it points to
	req := Request{Command: root + "/untrusted/head", Allowlist: []AllowEntry{{Pattern: root + "/trusted/evil"}},
		Env: Env{Cwd: root, Home: root}}
	if d := Evaluate(req); d.Outcome != OutcomeRun {
		t.Errorf("literal realpath: %s %s", d.Outcome, d.Reason)
	}
	// a glob does not
	req.Allowlist = []AllowEntry{{Pattern: root + "/trusted/ev*"}}
	if d := Evaluate(req); d.Outcome == OutcomeRun {
		t.Error("glob matched by realpath")
	}
	// and persisting records the resolved path
	if d := Evaluate(req); !slices.Equal(d.Persist, []string{root + "/untrusted/head"}) {
		t.Errorf("persist %q", d.Persist)
	}
}

func TestUnprofiledSafeBins(t *testing.T) {
	got := UnprofiledSafeBins([]string{"head", "Cat", "cat", "python3", "mytool"}, map[string]Profile{"mytool": {}})
	if !slices.Equal(got, []string{"cat", "python3"}) {
		t.Errorf("got %q", got)
	}
	if got := UnprofiledSafeBins(nil, nil); len(got) != 0 {
		t.Errorf("defaults: %q", got)
	}
}

// TestPersistOnlyExactPatterns: allow-always persists a resolved path as
// an allowlist pattern, and patterns have no escapes. A file the agent
// named "*", "**", "a?b", `a\b` (read as a/b) or " x " (trimmed) would
// have persisted a pattern allowing other files; such a path is not
// persisted (the run happens once). Generated over the metacharacters, in
// the file name and in a directory name.
func TestPersistOnlyExactPatterns(t *testing.T) {
	root := realTree(t)
	var names []string
	for _, m := range []string{"*", "**", "?", `\`, " "} {
		names = append(names, m, "a"+m, m+"b", "a"+m+"b")
	}
	for i, name := range names {
		for _, dirName := range []string{"plain", "d" + name} {
			if strings.Contains(dirName, `\`) && dirName == "d"+name && i%2 == 1 {
				continue
			}
			dir := filepath.Join(root, "persist", strconv.Itoa(i), dirName)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, name)
			if dirName != "plain" {
				file = filepath.Join(dir, "tool")
			}
			if strings.TrimSpace(filepath.Base(file)) == "" {
				continue
			}
			if err := os.WriteFile(file, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			req := Request{Command: quote(file), Security: SecurityAllowlist, Ask: AskOnMiss, Env: Env{Cwd: root, Home: root}}
			d := Evaluate(req)
			if d.Outcome != OutcomePrompt {
				t.Fatalf("%q: %s %s", file, d.Outcome, d.Reason)
			}
			broad := strings.ContainsAny(file, `*?\`) || strings.TrimSpace(file) != file
			if broad && len(d.Persist) != 0 {
				t.Errorf("%q persists %q", file, d.Persist)
			}
			if !broad && !slices.Equal(d.Persist, []string{file}) {
				t.Errorf("%q: persist %q", file, d.Persist)
			}
		}
	}
	// An ordinary path is persisted.
	if d := Evaluate(Request{Command: root + "/proj/tool", Security: SecurityAllowlist, Ask: AskOnMiss, Env: Env{Cwd: root, Home: root}}); !slices.Equal(d.Persist, []string{root + "/proj/tool"}) {
		t.Errorf("ordinary path: %q", d.Persist)
	}
}
