package e2etest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/host/shellenv"
)

// Main is the TestMain of every end-to-end test package: it marks the
// run (see otherRun), finds or builds the conch binary (ConchBin), probes
// the login shell once (LoginCache), runs the tests and exits with their
// code.
func Main(m *testing.M) {
	// Every process the tests start inherits the run's marker (see
	// otherRun).
	os.Setenv(runMarkerKey, strconv.Itoa(os.Getpid()))
	// CI runs with SHELL unset (conch then runs commands under sh, dash
	// on Debian); a developer's SHELL=/bin/bash must not make a test
	// pass here that fails there. A test that needs a shell names it
	// (StartConchEnv with SHELL=…).
	os.Unsetenv("SHELL")
	dir, err := os.MkdirTemp("", "conch-e2e-")
	if err != nil {
		panic(err)
	}
	bin, err := buildConch()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build conch:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	ConchBin, ShimBin = bin, filepath.Join(filepath.Dir(bin), "conch-shim")
	cache := filepath.Join(dir, "login-path.json")
	shellenv.StartLoginProbe(cache).Wait(-1)
	LoginCache, _ = os.ReadFile(cache)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	conchPkg = "github.com/conchsh/conch/cmd/conch"
	shimPkg  = "github.com/conchsh/conch/cmd/conch-shim"
)

// buildConch returns the path of a conch binary (with conch-shim beside
// it) built from the sources
// this test binary was built from. `go test ./...` runs the end-to-end
// packages' test binaries in parallel, and each would otherwise link its
// own copy of conch (a large binary: seconds of CPU per link on a busy
// machine). The binary is kept in the user's cache directory under a key
// that hashes every source file it is built from (the module's files by
// content, the module cache's by their versioned directory), the Go
// version and the build environment; the first package to need a key
// builds it under an exclusive flock on the key's lock file, the others
// wait on the lock and take the result. A changed source file changes the
// key, so a stale binary is never used. Keys unused for two days are
// removed.
func buildConch() (string, error) {
	key, err := sourceKey()
	if err != nil {
		return "", err
	}
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir()
	}
	root = filepath.Join(root, "conch-e2e-bin")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	bin := filepath.Join(root, key, "conch")
	// done is written (atomically) once the binary is complete: a build
	// cut short leaves no done file, and the next run builds again.
	done := bin + ".done"
	lock, err := fsutil.LockFile(filepath.Join(root, key+".lock"))
	if err != nil {
		return "", fmt.Errorf("lock the conch build: %w", err)
	}
	defer lock.Close()
	if _, err := os.Stat(done); err == nil {
		now := time.Now()
		os.Chtimes(filepath.Dir(bin), now, now)
		return bin, nil
	}
	pruneBuilds(root, key)
	if err := os.MkdirAll(filepath.Dir(bin), 0o700); err != nil {
		return "", err
	}
	// conch-shim beside conch, as go install puts them: the engine runs
	// every supervisor and sandbox init under it.
	build := exec.Command("go", "build", "-o", filepath.Dir(bin)+string(filepath.Separator), conchPkg, shimPkg)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w", conchPkg, err)
	}
	if err := fsutil.WriteFile(done, nil, 0o600); err != nil {
		return "", err
	}
	return bin, nil
}

// sourceKey hashes what the conch binary is built from: the files of
// every package it depends on (with their embedded files), go.mod and
// go.sum, the Go version and the environment that changes a build.
func sourceKey() (string, error) {
	list := exec.Command("go", "list", "-deps", "-f",
		`{{if not .Standard}}{{.Dir}}{{range .GoFiles}}|{{.}}{{end}}{{range .CgoFiles}}|{{.}}{{end}}{{range .SFiles}}|{{.}}{{end}}{{range .EmbedFiles}}|{{.}}{{end}}{{end}}`,
		conchPkg, shimPkg)
	list.Stderr = os.Stderr
	out, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("go list -deps %s: %w", conchPkg, err)
	}
	env, err := exec.Command("go", "env", "GOVERSION", "GOOS", "GOARCH", "CGO_ENABLED", "GOFLAGS", "GOEXPERIMENT", "GOAMD64", "GOMOD", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	envLines := strings.Split(string(env), "\n")
	gomod, modcache := envLines[7], envLines[8]
	h := sha256.New()
	h.Write(env)
	hashFile := func(p string) error {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%s\x00", p)
		_, err = io.Copy(h, f)
		return err
	}
	for _, p := range []string{gomod, filepath.Join(filepath.Dir(gomod), "go.sum")} {
		if err := hashFile(p); err != nil && !os.IsNotExist(err) {
			return "", err
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		files := strings.Split(line, "|")
		dir := files[0]
		if modcache != "" && strings.HasPrefix(dir, modcache+string(filepath.Separator)) {
			// The module cache is read-only and its directories
			// carry the module's version.
			fmt.Fprintf(h, "%s\n", line)
			continue
		}
		for _, f := range files[1:] {
			if err := hashFile(filepath.Join(dir, f)); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// pruneBuilds removes the binaries of other keys not used for two days
// (their lock files stay: removing a lock another process holds would
// let two builders in).
func pruneBuilds(root, keep string) {
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if !e.IsDir() || e.Name() == keep {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > 48*time.Hour {
			os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}
