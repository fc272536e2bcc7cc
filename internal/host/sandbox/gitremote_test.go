package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestGitRemoteInWorkspace generates the ways a repository's remote can
// name a repository of the workspace that the search for .git entries
// does not find (a bare one, at any depth) — url or pushurl, each form
// of a local path — and checks that GitProtected protects it as it does
// the workspace's own git directory, under both gitAccess settings. A
// push runs the remote repository's hooks on the host: the old code left
// them writable.
func TestGitRemoteInWorkspace(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir, cmd.Env = dir, append(gitEnv(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	forms := map[string]func(ws, rel string) string{
		"dot":      func(ws, rel string) string { return "./" + rel },
		"bare":     func(ws, rel string) string { return rel },
		"abs":      func(ws, rel string) string { return filepath.Join(ws, rel) },
		"file-url": func(ws, rel string) string { return "file://" + filepath.Join(ws, rel) },
		"up":       func(ws, rel string) string { return "../" + filepath.Base(ws) + "/" + rel },
	}
	for _, rel := range []string{"remote.git", "a/b/c/d/e/deep.git"} {
		for fname, f := range forms {
			for _, key := range []string{"remote.origin.url", "remote.origin.pushurl"} {
				for _, access := range []string{"ro", "rw"} {
					name := rel + "/" + fname + "/" + key + "/" + access
					ws := filepath.Join(t.TempDir(), "ws")
					os.MkdirAll(filepath.Join(ws, rel), 0o755)
					run(ws, "init", "-q")
					run(filepath.Join(ws, rel), "init", "-q", "--bare")
					if key == "remote.origin.pushurl" {
						run(ws, "config", "remote.origin.url", "https://example.com/x.git")
					}
					run(ws, "config", key, f(ws, rel))
					got, err := GitProtected("", ws, access)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					want := []string{rel}
					if access == "rw" {
						want = []string{filepath.Join(rel, "config"), filepath.Join(rel, "hooks")}
					}
					for _, w := range want {
						if !slices.Contains(got, w) {
							t.Errorf("%s: %s not protected (got %v)", name, w, got)
						}
					}
				}
			}
		}
	}
	// An ext:: remote is a command: its program is protected.
	if refs := keyRefs(gitConfigEntry{key: "remote.origin.url", value: "ext::tools/transport %S"}, "", "/ws", "/home", nil); !madeRef(refs, "/ws/tools/transport") {
		t.Errorf("ext:: remote: %v", refs)
	}
	// A remote elsewhere or on another host names nothing here.
	ws := t.TempDir()
	run(ws, "init", "-q")
	for _, u := range []string{"git@example.com:x.git", "https://example.com/x.git", "ssh://h/x", "/nonexistent/x.git"} {
		run(ws, "config", "remote.r.url", u)
		got, err := GitProtected("", ws, "ro")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range got {
			if g != ".git" && filepath.Dir(g) != ".git" {
				t.Errorf("remote %s: protects %s", u, g)
			}
		}
	}
}
