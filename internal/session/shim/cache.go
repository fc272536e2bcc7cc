package shim

import (
	"bufio"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/conchsh/conch/internal/base/fsutil"
)

// The shim of a module checkout. `go run ./cmd/conch serve` (the README's
// first command) builds conch into a temporary directory with no shim
// beside it. Such a conch builds the shim once, in the background, from
// the checkout it runs in, into the user's cache directory, keyed by the
// Go build ID of the running conch (which changes with any change to the
// source); later starts of the same build find it there. The build
// reuses the packages `go run` has just compiled, so it is mostly a link.
//
// Only a conch that `go run` built (its executable lies in a go-build
// directory and is named conch) and whose working directory is inside
// this module's checkout does this; an installed or test-built conch
// never starts a build.

// modulePath is this module's path, as go.mod names it.
const modulePath = "github.com/conchsh/conch"

// fromCache returns the cached shim of the running build ("" when there
// is none yet) and whether a build of it is under way; cached is where
// that build puts it.
func fromCache(ctx context.Context, self string) (path string, building bool) {
	p := cachePath(self)
	if p == "" {
		return "", false
	}
	if isExecutable(p) {
		return p, false
	}
	return "", startBuild(checkout(), filepath.Dir(p), p)
}

// cachePath is where the shim of the running build is cached, or "" when
// this conch builds none (not built by go run, or not in a checkout).
func cachePath(self string) string {
	if !goRunBuilt(self) || checkout() == "" {
		return ""
	}
	key := buildKey(self)
	base, err := os.UserCacheDir()
	if key == "" || err != nil {
		return ""
	}
	return filepath.Join(base, "conch", "shim", key, Name)
}

// goRunBuilt reports whether self looks like the executable `go run`
// builds: <tmp>/go-build…/b001/exe/conch.
func goRunBuilt(self string) bool {
	if filepath.Base(self) != "conch" || filepath.Base(filepath.Dir(self)) != "exe" {
		return false
	}
	return strings.Contains(self, string(filepath.Separator)+"go-build")
}

// checkout returns the root of this module's checkout holding the working
// directory, or "".
func checkout() string {
	if bi, ok := debug.ReadBuildInfo(); !ok || bi.Main.Path != modulePath {
		return ""
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if modOf(filepath.Join(dir, "go.mod")) == modulePath {
			if _, err := os.Stat(filepath.Join(dir, "cmd", Name, "main.go")); err == nil {
				return dir
			}
			return ""
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// modOf returns the module path a go.mod declares, or "".
func modOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	return ""
}

// buildKey is a file-name-safe digest of the Go build ID of the
// executable at self (the .note.go.buildid note), with the protocol.
func buildKey(self string) string {
	f, err := elf.Open(self)
	if err != nil {
		return ""
	}
	defer f.Close()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		return ""
	}
	b, err := sec.Data()
	if err != nil || len(b) == 0 {
		return ""
	}
	sum := sha256.Sum256(append(b, protocol...))
	return hex.EncodeToString(sum[:12])
}

// startBuild starts `go build ./cmd/conch-shim` in src into a temporary
// file of its own, moved onto p by the same child process when the build
// succeeds, so that a conch that exits first (a CLI command run with `go
// run`) still leaves a complete shim, and never a partial one at p. It
// does nothing when another conch holds the build lock (it is building
// the same). The build runs in its own process group at a low priority;
// its goroutine waits for it and holds the lock until then.
func startBuild(src, dir, p string) bool {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false
	}
	lock, err := fsutil.LockFile(p + ".lock")
	if err != nil {
		return false
	}
	if err := fsutil.TryLock(lock, true); err != nil {
		lock.Close()
		return true // another conch is building it
	}
	removeStale(p)
	tmp := fmt.Sprintf("%s.tmp-%d", p, os.Getpid())
	gobin := "go"
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		gobin = filepath.Join(goroot, "bin", "go")
	}
	cmd := exec.Command("/bin/sh", "-c", `"$0" build -o "$1" ./cmd/conch-shim && exec mv -f "$1" "$2"`, gobin, tmp, p)
	cmd.Dir = src
	// Static: no dynamic loader at every start (about 0.6 ms of CPU
	// here), and a binary that runs in any container it is mounted in.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.SysProcAttr = buildAttr()
	if err := cmd.Start(); err != nil {
		lock.Close()
		return false
	}
	lowerPriority(cmd.Process.Pid)
	go func() {
		defer lock.Close()
		if cmd.Wait() != nil {
			os.Remove(tmp)
		}
	}()
	return true
}

// removeStale removes what builds that did not finish left beside p.
func removeStale(p string) {
	olds, _ := filepath.Glob(p + ".tmp-*")
	for _, o := range olds {
		if fi, err := os.Stat(o); err == nil && time.Since(fi.ModTime()) > 10*time.Minute {
			os.Remove(o)
		}
	}
}
