//go:build linux

package bwrap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/conchsh/conch/internal/host/sandbox"
	"golang.org/x/sys/unix"
)

// bwrap resolves a bind's source path on the host when it mounts it,
// following symbolic links. Bwrap.Command checks that no path it binds
// below the workspace passes through a link, but a process of an earlier
// run that is still running writes the same workspace: between that check
// and bwrap's mount it could swap a directory for a link (link -> ..) and
// get the host's directory bound. So `conch sandbox-init --beneath ROOT`
// (and the root gateway's --stage, after it drops to runAs) opens every
// such source itself, one component at a time without following links,
// and hands bwrap the open file (--bind-fd, --ro-bind-fd): what bwrap
// mounts is what was checked.

// bindFDVersion reports whether the bwrap at bin knows --bind-fd and
// --ro-bind-fd (bubblewrap 0.8.0 and later).
func bindFDVersion(bin string) bool {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return false
	}
	m := regexp.MustCompile(`(\d+)\.(\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		return false
	}
	var major, minor int
	fmt.Sscan(m[1], &major)
	fmt.Sscan(m[2], &minor)
	return major > 0 || minor >= 8
}

// bindBeneath rewrites argv's "--bind SRC DST" and "--ro-bind SRC DST"
// whose SRC lies below root into "--bind-fd N DST" and "--ro-bind-fd N
// DST", N an O_PATH descriptor of SRC opened without following a link
// (it stays open across exec). A link on the way fails.
func bindBeneath(root string, argv []string) ([]string, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(rfd)
	out := make([]string, 0, len(argv))
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			return append(out, argv[i:]...), nil
		}
		if (a != "--bind" && a != "--ro-bind") || i+2 >= len(argv) {
			out = append(out, a)
			continue
		}
		rel, ok := sandbox.Within(root, argv[i+1])
		if !ok || rel == "." {
			out = append(out, a)
			continue
		}
		fd, err := openBeneath(rfd, rel)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (a symbolic link below the workspace where the sandbox mounts read-only; remove it on the host)", argv[i+1], err)
		}
		out = append(out, a+"-fd", fmt.Sprint(fd), argv[i+2])
		i += 2
	}
	return out, nil
}

// openBeneath opens rel below the directory dirfd one component at a
// time, refusing symbolic links, and returns an O_PATH descriptor that
// is not closed on exec.
func openBeneath(dirfd int, rel string) (int, error) {
	parts := strings.Split(filepath.Clean(rel), "/")
	cur := dirfd
	for i, part := range parts {
		if part == ".." || part == "." || part == "" {
			return -1, fmt.Errorf("bad path %q", rel)
		}
		flags := unix.O_PATH | unix.O_NOFOLLOW
		last := i == len(parts)-1
		if !last {
			flags |= unix.O_DIRECTORY | unix.O_CLOEXEC
		}
		fd, err := unix.Openat(cur, part, flags, 0)
		if cur != dirfd {
			unix.Close(cur)
		}
		if err != nil {
			if err == unix.ELOOP || err == unix.ENOTDIR {
				return -1, fmt.Errorf("%s is not a directory or is a symbolic link", filepath.Join(parts[:i+1]...))
			}
			return -1, err
		}
		if last {
			// O_PATH|O_NOFOLLOW opens a link itself rather than failing.
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
				unix.Close(fd)
				return -1, fmt.Errorf("%s is a symbolic link", rel)
			}
			return fd, nil
		}
		cur = fd
	}
	return -1, fmt.Errorf("empty path")
}

// RunBeneath is `sandbox-init --beneath ROOT -- bwrap ...`.
func RunBeneath(root string, argv []string) int {
	a, err := bindBeneath(root, argv)
	if err != nil {
		return sandbox.InitFail(err.Error())
	}
	err = syscall.Exec(a[0], a, os.Environ())
	return sandbox.InitFail(fmt.Sprintf("exec %s: %v", a[0], err))
}
