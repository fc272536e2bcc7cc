//go:build linux

package bwrap

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBindBeneath: binds below the root become descriptors of the very
// file or directory at that path; a symbolic link anywhere on the way
// (first component, middle, last; to inside or outside the root) fails;
// binds elsewhere and everything after "--" are left alone.
func TestBindBeneath(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ws")
	out := filepath.Join(filepath.Dir(root), "out")
	for _, d := range []string{".git/hooks", "real/gd", "sub"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.MkdirAll(filepath.Join(out, "gd"), 0o755)
	os.WriteFile(filepath.Join(root, ".git", "config"), []byte("[core]\n"), 0o644)
	os.Symlink("..", filepath.Join(root, "up"))
	os.Symlink("real", filepath.Join(root, "in"))
	os.Symlink(out, filepath.Join(root, "sub", "abs"))
	os.Symlink("../config", filepath.Join(root, ".git", "hooks", "cfg"))
	for _, ok := range []string{".git", ".git/hooks", ".git/config", "real/gd"} {
		argv := []string{"bwrap", "--bind", "/usr", "/usr", "--bind", root, root, "--ro-bind", filepath.Join(root, ok), "/dst", "--", "sh", "--bind", filepath.Join(root, ok), "x"}
		got, err := bindBeneath(root, argv)
		if err != nil {
			t.Fatalf("%s: %v", ok, err)
		}
		want := fmt.Sprintf("bwrap --bind /usr /usr --bind %s %s --ro-bind-fd ", root, root)
		if !strings.HasPrefix(strings.Join(got, " "), want) || got[9] != "/dst" || strings.Join(got[10:], " ") != "-- sh --bind "+filepath.Join(root, ok)+" x" {
			t.Fatalf("%s: %q", ok, got)
		}
		fd, _ := strconv.Atoi(got[8])
		var a, b unix.Stat_t
		if unix.Fstat(fd, &a) != nil || unix.Lstat(filepath.Join(root, ok), &b) != nil || a.Ino != b.Ino || a.Dev != b.Dev {
			t.Fatalf("%s: fd %d is another file", ok, fd)
		}
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC != 0 {
			t.Fatalf("%s: fd %d closes on exec (%v)", ok, fd, err)
		}
		unix.Close(fd)
	}
	for _, bad := range []string{"up", "up/out", "up/out/gd", "in/gd", "sub/abs", "sub/abs/gd", ".git/hooks/cfg", "missing"} {
		argv := []string{"bwrap", "--bind", filepath.Join(root, bad), "/dst", "--", "sh"}
		if got, err := bindBeneath(root, argv); err == nil {
			t.Errorf("%s: accepted: %q", bad, got)
		}
	}
}

// TestCheckMounts: after bwrap, every mount made after the workspace's
// own at, below or above it must be the workspace's own subdirectory at
// its own place. Each bad entry is one a swapped link can produce.
func TestCheckMounts(t *testing.T) {
	base := `20 1 0:40 / / rw - tmpfs tmpfs rw
21 20 0:41 / /tmp rw - tmpfs tmpfs rw
22 20 8:1 /usr /usr ro - ext4 /dev/vda rw
23 21 8:1 /srv/my\040ws /tmp/p/my\040ws rw - ext4 /dev/vda rw
24 23 8:1 /srv/my\040ws/.git /tmp/p/my\040ws/.git ro - ext4 /dev/vda rw
25 23 8:1 /srv/my\040ws/real /tmp/p/my\040ws/real rw - ext4 /dev/vda rw
26 20 8:1 /x/conch /run/conch/conch ro - ext4 /dev/vda rw
`
	ms, err := parseMountinfo(strings.NewReader(base))
	if err != nil || len(ms) != 7 || ms[3].point != "/tmp/p/my ws" {
		t.Fatalf("parse: %v %+v", err, ms)
	}
	if err := checkMounts(ms, "/tmp/p/my ws"); err != nil {
		t.Fatalf("good mounts refused: %v", err)
	}
	for name, line := range map[string]string{
		"host parent above":       `27 21 8:1 /srv /tmp/p rw - ext4 /dev/vda rw`,
		"subdir at the parent":    `27 21 8:1 /srv/my\040ws/real /tmp/p rw - ext4 /dev/vda rw`,
		"host dir below":          `27 23 8:1 /home/u /tmp/p/my\040ws/real rw - ext4 /dev/vda rw`,
		"subdir at another place": `27 23 8:1 /srv/my\040ws/real /tmp/p/my\040ws/other rw - ext4 /dev/vda rw`,
		"another device below":    `27 23 0:50 /srv/my\040ws/real /tmp/p/my\040ws/real rw - tmpfs tmpfs rw`,
		"stage tmpfs above":       `27 21 0:60 / /tmp/p rw - tmpfs tmpfs rw`,
	} {
		ms, _ := parseMountinfo(strings.NewReader(base + line + "\n"))
		if err := checkMounts(ms, "/tmp/p/my ws"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A configured bind into the workspace is left alone.
	ms2, _ := parseMountinfo(strings.NewReader(base + "27 23 8:2 /data /tmp/p/my\\040ws/data ro - ext4 /dev/vdb rw\n"))
	if err := checkMounts(ms2, "/tmp/p/my ws"); err == nil {
		t.Error("a foreign bind accepted without --allow-mount")
	}
	if err := checkMounts(ms2, "/tmp/p/my ws", "/tmp/p/my ws/data"); err != nil {
		t.Errorf("a configured bind refused: %v", err)
	}
	if err := checkMounts(ms[:3], "/tmp/p/my ws"); err == nil {
		t.Error("no workspace mount accepted")
	}
}
