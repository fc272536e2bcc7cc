package patch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code, msg string) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want a *patch.Error %s", err, code)
	}
	if pe.Code != code || (msg != "" && pe.Message != msg) {
		t.Fatalf("got %s %q, want %s %q", pe.Code, pe.Message, code, msg)
	}
}

// TestEscapes checks every way out of the workspace (.., absolute
// paths, symlinked ancestors and final components, hard links): each patch
// fails with path_outside_workspace and changes nothing, inside or out.
func TestEscapes(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	out := filepath.Join(base, "outside")
	mustWrite(t, filepath.Join(out, "secret.txt"), "secret\n")
	mustWrite(t, filepath.Join(ws, "a.txt"), "a\n")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(out, filepath.Join(ws, "dirlink")))                           // directory symlink out
	must(os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(ws, "leaf"))) // file symlink out
	must(os.Symlink(filepath.Join(out, "nothing.txt"), filepath.Join(ws, "broken")))
	must(os.Symlink("../outside", filepath.Join(ws, "rel")))
	must(os.Symlink(filepath.Join(base, "gone"), filepath.Join(ws, "brokendir")))
	must(os.Link(filepath.Join(out, "secret.txt"), filepath.Join(ws, "hard.txt")))
	cases := []struct{ name, patch, path string }{
		{"dotdot", "*** Add File: ../outside/x.txt\n+x", "../outside/x.txt"},
		{"absolute", "*** Add File: " + out + "/x.txt\n+x", out + "/x.txt"},
		{"dir symlink add", "*** Add File: dirlink/x.txt\n+x", "dirlink/x.txt"},
		{"dir symlink update", "*** Update File: dirlink/secret.txt\n-secret\n+pwned", "dirlink/secret.txt"},
		{"relative dir symlink", "*** Add File: rel/y.txt\n+x", "rel/y.txt"},
		{"deep new path under dir symlink", "*** Add File: dirlink/a/b/c.txt\n+x", "dirlink/a/b/c.txt"},
		{"leaf symlink update", "*** Update File: leaf\n-secret\n+pwned", "leaf"},
		{"leaf symlink add", "*** Add File: leaf\n+pwned", "leaf"},
		{"broken symlink add", "*** Add File: broken\n+pwned", "broken"},
		{"broken dir symlink", "*** Add File: brokendir/x.txt\n+x", "brokendir/x.txt"},
		{"hardlink update", "*** Update File: hard.txt\n-secret\n+pwned", "hard.txt"},
		{"hardlink delete", "*** Delete File: hard.txt", "hard.txt"},
		{"move to outside", "*** Update File: a.txt\n*** Move to: dirlink/a.txt\n-a\n+b", "dirlink/a.txt"},
		{"hardlink move", "*** Update File: hard.txt\n*** Move to: moved.txt\n-secret\n+s", "hard.txt"},
		{"good then bad", "*** Add File: fine.txt\n+x\n*** Add File: ../z.txt\n+x", "../z.txt"},
	}
	before := readTree(t, base)
	for _, c := range cases {
		_, err := Apply(context.Background(), "*** Begin Patch\n"+c.patch+"\n*** End Patch", Options{Workspace: ws})
		wantCode(t, err, CodeOutside, "Path escapes workspace: "+c.path)
		compareTrees(t, readTree(t, base), before)
	}
	// Deleting a symlink that points out removes the link only.
	if _, err := Apply(context.Background(), "*** Begin Patch\n*** Delete File: leaf\n*** End Patch", Options{Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "leaf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("link still there: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "secret.txt")); string(b) != "secret\n" {
		t.Errorf("target changed: %q", b)
	}
	// workspaceOnly off: the same paths are allowed.
	if _, err := Apply(context.Background(), "*** Begin Patch\n*** Update File: dirlink/secret.txt\n-secret\n+changed\n*** End Patch", Options{Workspace: ws, AllowOutside: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "secret.txt")); string(b) != "changed\n" {
		t.Errorf("AllowOutside: got %q", b)
	}
}

// TestSymlinksInside: links whose targets stay inside are followed for
// Add and Update (the link stays a link) and removed themselves by Delete
// and by the source side of a move.
func TestSymlinksInside(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "real", "f.txt"), "one\n")
	os.Symlink("real", filepath.Join(ws, "alias"))
	os.Symlink(filepath.Join(ws, "real", "f.txt"), filepath.Join(ws, "abs-link"))
	os.Symlink("real/new.txt", filepath.Join(ws, "dangling-inside"))
	p := "*** Begin Patch\n*** Update File: alias/f.txt\n-one\n+two\n*** Update File: abs-link\n-two\n+three\n*** Add File: dangling-inside\n+made\n*** End Patch"
	res, err := Apply(context.Background(), p, Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Success. Updated the following files:\nM alias/f.txt\nM abs-link\nA dangling-inside"; res.Text != want {
		t.Errorf("text %q", res.Text)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "real", "f.txt")); string(b) != "three\n" {
		t.Errorf("f.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "real", "new.txt")); string(b) != "made\n" {
		t.Errorf("new.txt = %q", b)
	}
	for _, l := range []string{"abs-link", "dangling-inside"} {
		if fi, err := os.Lstat(filepath.Join(ws, l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink", l)
		}
	}
}

// leftovers fails on temporary or backup files left in the tree.
func leftovers(t *testing.T, root string) {
	t.Helper()
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".conch-") {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

// TestRollback makes the third commit step fail and checks that the two
// done before it are undone: nothing changed, no temporary files, no
// created directories.
func TestRollback(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "a.txt"), "a\n")
	mustWrite(t, filepath.Join(ws, "b.txt"), "b\n")
	mustWrite(t, filepath.Join(ws, "c.txt"), "c\n")
	before := readTree(t, ws)
	commitHook = func(step int, rel string) error {
		if step == 3 {
			return &os.PathError{Op: "rename", Path: rel, Err: syscall.EIO}
		}
		return nil
	}
	defer func() { commitHook = nil }()
	p := "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Add File: new/dir/n.txt\n+n\n*** Delete File: b.txt\n*** Update File: c.txt\n-c\n+C\n*** End Patch"
	_, err := Apply(context.Background(), p, Options{Workspace: ws})
	wantCode(t, err, CodeIO, "Patch failed at c.txt: input/output error; no files were changed.")
	compareTrees(t, readTree(t, ws), before)
}

// TestPartial: when the rollback itself fails the message says what was
// applied and names the kept backups.
func TestPartial(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "a.txt"), "a\n")
	mustWrite(t, filepath.Join(ws, "b.txt"), "b\n")
	commitHook = func(step int, rel string) error {
		if step == 1 {
			// Make the undo of step 0 fail: its backup disappears.
			m, _ := filepath.Glob(filepath.Join(ws, ".a.txt.conch-*.bak"))
			for _, f := range m {
				os.Remove(f)
			}
			return &os.PathError{Op: "rename", Path: rel, Err: syscall.ENOSPC}
		}
		return nil
	}
	defer func() { commitHook = nil }()
	_, err := Apply(context.Background(), "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Update File: b.txt\n-b\n+B\n*** End Patch", Options{Workspace: ws})
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != CodeIO || !strings.HasPrefix(pe.Message, "Patch partially applied: M a.txt; failed at b.txt: no space left on device") {
		t.Fatalf("got %v", err)
	}
}

// TestAbortedBeforeWrite: a cancelled context stops before anything is
// written.
func TestAbortedBeforeWrite(t *testing.T) {
	ws := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Apply(ctx, "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch", Options{Workspace: ws})
	wantCode(t, err, CodeAborted, "Aborted")
	if _, err := os.Stat(filepath.Join(ws, "a.txt")); err == nil {
		t.Error("written despite the cancel")
	}
}

func TestLimits(t *testing.T) {
	ws := t.TempDir()
	big := "*** Begin Patch\n*** Add File: a\n" + strings.Repeat("+x\n", MaxPatchBytes/3+1) + "*** End Patch"
	_, err := Apply(context.Background(), big, Options{Workspace: ws})
	wantCode(t, err, CodeInvalidPatch, "")
	f, _ := os.Create(filepath.Join(ws, "huge"))
	f.Truncate(MaxFileBytes + 1)
	f.Close()
	_, err = Apply(context.Background(), "*** Begin Patch\n*** Update File: huge\n-a\n+b\n*** End Patch", Options{Workspace: ws})
	wantCode(t, err, CodeInvalidPatch, "File too large to patch: huge (16777217 bytes, limit 16777216 bytes)")
}

// TestViewRootAndProtected: sandbox-view paths map onto the workspace and
// protected paths are refused.
func TestViewRootAndProtected(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, ".git", "hooks", "pre-commit"), "#!/bin/sh\n")
	opt := Options{Workspace: ws, ViewRoot: "/workspace", Protected: []string{filepath.Join(ws, ".git", "hooks")}}
	res, err := Apply(context.Background(), "*** Begin Patch\n*** Add File: /workspace/src/x.go\n+package x\n*** End Patch", opt)
	if err != nil || res.Added[0] != "src/x.go" {
		t.Fatalf("%v %+v", err, res)
	}
	_, err = Apply(context.Background(), "*** Begin Patch\n*** Delete File: /workspace/.git/hooks/pre-commit\n*** End Patch", opt)
	wantCode(t, err, CodeOutside, "Path is protected in the sandbox: .git/hooks/pre-commit")
}

func TestResultDetails(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "m.txt"), "m\n")
	mustWrite(t, filepath.Join(ws, "d.txt"), "d\n")
	in := "*** Begin Patch\n*** Add File: a.txt\n+a\n*** Update File: m.txt\n*** Move to: n.txt\n-m\n+n\n*** Delete File: d.txt\n*** End Patch"
	res, err := Apply(context.Background(), in, Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Added, ",") != "a.txt" || strings.Join(res.Modified, ",") != "n.txt" || strings.Join(res.Deleted, ",") != "d.txt" {
		t.Errorf("summary %+v", res)
	}
	if res.PatchSHA256 != Digest(in) || len(res.PatchSHA256) != 64 {
		t.Errorf("digest %q", res.PatchSHA256)
	}
	ops := map[string]string{}
	for _, f := range res.Files {
		ops[f.Path] = f.Op
		if (f.Op != "add") != (f.SHA256Before != "") || (f.Op != "delete") != (f.SHA256After != "") {
			t.Errorf("hashes of %+v", f)
		}
	}
	if ops["a.txt"] != "add" || ops["m.txt"] != "delete" || ops["n.txt"] != "add" || ops["d.txt"] != "delete" {
		t.Errorf("ops %v", ops)
	}
}

// TestProtectedThroughSymlinks: a protected path stays protected when the
// workspace is named through a symlink, and when a link elsewhere in the
// workspace (or the protected name itself) points into it.
func TestProtectedThroughSymlinks(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real")
	mustWrite(t, filepath.Join(real, ".git", "hooks", "pre-commit"), "#!/bin/sh\n")
	link := filepath.Join(root, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".git/hooks", filepath.Join(real, "hk")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(real, "h2"), 0o755)
	if err := os.Symlink("h2", filepath.Join(real, ".conch")); err != nil {
		t.Fatal(err)
	}
	opt := Options{Workspace: link, Protected: []string{filepath.Join(link, ".git", "hooks"), filepath.Join(link, ".conch")}}
	for _, p := range []string{".git/hooks/pre-commit", "hk/pre-commit", "hk/post-checkout", ".conch/config.json"} {
		_, err := Apply(context.Background(), "*** Begin Patch\n*** Add File: "+p+"\n+pwned\n*** End Patch", opt)
		if err == nil {
			t.Errorf("%s: a protected path was written", p)
			continue
		}
		wantCode(t, err, CodeOutside, "Path is protected in the sandbox: "+p)
	}
}
