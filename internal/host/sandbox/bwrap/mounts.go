//go:build linux

package bwrap

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/conchsh/conch/internal/host/sandbox"
)

// A process of an earlier run that is still running writes the same
// workspace while bwrap mounts the next one: it can swap a directory
// bwrap is about to bind below the workspace for a symbolic link, and
// bwrap, which mounts by path, then binds what the link reaches (a host
// directory above the workspace) or binds onto where it leads. Checks
// before bwrap cannot close that; a check after it can, since the mounts
// are fixed once the command runs (it cannot mount). So inside the
// sandbox, before the command, `conch sandbox-init --verify-mounts
// INSIDE` reads /proc/self/mountinfo and refuses to run unless every
// mount made after the workspace's own, at the workspace, below it or at
// a directory above it, is a bind of the workspace's own subdirectory x
// (same device, root R/x where R is the workspace's root) at INSIDE/x.

type mountEntry struct {
	dev, root, point string
}

// parseMountinfo reads the fields of /proc/self/mountinfo that matter.
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			return nil, fmt.Errorf("mountinfo: short line %q", sc.Text())
		}
		out = append(out, mountEntry{dev: f[2], root: unescapeMount(f[3]), point: unescapeMount(f[4])})
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, …).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// checkMounts applies the rule above to the mounts ms for the workspace
// mounted at inside; mounts at the points in allow (the configured
// binds) are left alone.
func checkMounts(ms []mountEntry, inside string, allow ...string) error {
	inside = filepath.Clean(inside)
	ws := -1
	for i, m := range ms {
		if m.point == inside {
			ws = i
			break
		}
	}
	if ws < 0 {
		return fmt.Errorf("the workspace %s is not mounted", inside)
	}
	dev, root := ms[ws].dev, ms[ws].root
	for _, m := range ms[ws+1:] {
		if slices.Contains(allow, m.point) {
			continue
		}
		rel, below := sandbox.Within(inside, m.point)
		_, above := sandbox.Within(m.point, inside)
		if !below && !above {
			continue
		}
		want := ""
		if below {
			want = filepath.Join(root, rel)
		}
		if !below || m.dev != dev || filepath.Clean(m.root) != want {
			return fmt.Errorf("a mount at %s shows %s of device %s, not the workspace's own %s (a directory swapped for a symbolic link while the sandbox was set up?); run again", m.point, m.root, m.dev, want)
		}
	}
	return nil
}

// VerifyMounts is `sandbox-init --verify-mounts INSIDE [--allow-mount P]...`.
func VerifyMounts(inside string, allow []string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	ms, err := parseMountinfo(f)
	if err != nil {
		return err
	}
	return checkMounts(ms, inside, allow...)
}
