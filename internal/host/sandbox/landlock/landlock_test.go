//go:build linux

package landlock

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
)

func TestOthersRead(t *testing.T) {
	d := t.TempDir()
	os.Chmod(d, 0o755)
	os.MkdirAll(filepath.Join(d, "open", "deep"), 0o755)
	os.WriteFile(filepath.Join(d, "open", "deep", "f"), nil, 0o644)
	os.MkdirAll(filepath.Join(d, "mixed"), 0o755)
	os.WriteFile(filepath.Join(d, "mixed", "pub"), nil, 0o644)
	os.WriteFile(filepath.Join(d, "mixed", "secret"), nil, 0o600)
	os.MkdirAll(filepath.Join(d, "private"), 0o700)
	os.Symlink(filepath.Join(d, "mixed", "secret"), filepath.Join(d, "link"))
	var dirs, files, listed []string
	if othersRead(d, 0, &dirs, &files, &listed, nil) {
		t.Fatal("a tree with a 0600 file is wholly readable")
	}
	if !slices.Equal(dirs, []string{filepath.Join(d, "open")}) || !slices.Equal(files, []string{filepath.Join(d, "mixed", "pub")}) ||
		!slices.Contains(listed, d) || !slices.Contains(listed, filepath.Join(d, "mixed")) {
		t.Fatalf("dirs %v files %v listed %v", dirs, files, listed)
	}
}

// TestCommandBlocks: the init waits on --block-fd 3, and the run says so,
// so that the supervisor passes that descriptor.
func TestCommandBlocks(t *testing.T) {
	ws := t.TempDir()
	s := (&config.Config{}).SandboxFor("main")
	r := &sandbox.Run{Home: t.TempDir(), Exe: "/x/conch", Settings: s, Workspace: ws, Cwd: ws, Command: "true"}
	argv, _, err := (&Landlock{}).Command(r)
	if err != nil {
		t.Fatal(err)
	}
	if !r.BlockFD || !strings.Contains(strings.Join(argv, " "), "--block-fd 3") {
		t.Errorf("block fd %v, argv %q", r.BlockFD, argv)
	}
	if r.ProtectedReadOnly || r.CttyInside {
		t.Errorf("landlock cannot keep the git directory read-only, nor claims a terminal inside: %+v", r)
	}
}
