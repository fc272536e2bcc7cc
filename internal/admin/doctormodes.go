package admin

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/store/ledger"
)

// doctorEUID is the effective uid Doctor judges the gateway by; tests replace it.
var doctorEUID = os.Geteuid

// homeSecrets returns the paths (relative to home) of the files that hold
// credentials or the audit trail: a mode other than 0600 on them is the
// error home.permissions.
func homeSecrets(home string) []string {
	out := []string{"exec-approvals.json", "config.json", "operator.token", "agents.json", ledger.KeyFile,
		filepath.Join("node", "identity.key"), filepath.Join("node", "node.json")}
	for _, dir := range []string{"ledger", "nodes"} {
		ents, _ := os.ReadDir(filepath.Join(home, dir))
		for _, e := range ents {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// loosePath is a directory or file in (or of) the home whose mode lets
// other users in.
type loosePath struct {
	path string
	mode fs.FileMode
	want fs.FileMode
	dir  bool
}

// looseModes walks the home and the fallback socket directory and returns
// the directories that are not 0700 and the files that group or others may
// read or write, skipping skip (relative paths reported elsewhere). Only
// paths owned by the current user are returned: another owner is reported
// (and left alone by --fix) as home.permissions.
func looseModes(home string, skip []string) []loosePath {
	if !modeBits {
		return nil
	}
	var out []loosePath
	check := func(path string, d fs.DirEntry) {
		fi, err := d.Info()
		if err != nil {
			return
		}
		if uid, ok := fileOwner(fi); ok && uid != os.Getuid() {
			return
		}
		switch {
		case fi.IsDir() && fi.Mode().Perm() != 0o700:
			out = append(out, loosePath{path, fi.Mode().Perm(), 0o700, true})
		case fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0:
			out = append(out, loosePath{path, fi.Mode().Perm(), fi.Mode().Perm() &^ 0o077, false})
		}
	}
	walk := func(root string) {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable: nothing to say about it here
			}
			if path == home {
				return nil // the home itself is home.permissions
			}
			rel, _ := filepath.Rel(home, path)
			if slices.Contains(skip, rel) {
				return nil
			}
			check(path, d)
			if d.IsDir() && agentTree(rel) {
				return filepath.SkipDir
			}
			return nil
		})
	}
	walk(home)
	// A supervisor's socket lives outside the home when the home's path is too
	// long for a socket address; its directory guards it the same way.
	sock := engine.FallbackSocketDir(home)
	for _, dir := range []string{filepath.Dir(sock), sock} {
		if fi, err := os.Lstat(dir); err == nil {
			check(dir, fs.FileInfoToDirEntry(fi))
		}
	}
	return out
}

// agentTree reports whether rel (relative to the home) is a sandbox's home, tmp or
// private workspace: what is inside is the agent's, written with the agent's umask,
// and only the owner can enter the directory (which is itself checked).
func agentTree(rel string) bool {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	return len(parts) == 3 && parts[0] == "sandboxes" && slices.Contains([]string{"home", "tmp", "workspace"}, parts[2])
}

// doctorModes adds the home.modes warnings: at most maxModeFindings paths
// by name, then a count of the rest.
func doctorModes(add func(id, level, format string, args ...any), home string) {
	const maxModeFindings = 10
	loose := looseModes(home, homeSecrets(home))
	for i, p := range loose {
		if i == maxModeFindings {
			add("home.modes", "warn", "and %d more paths in %s with loose modes (conch doctor --fix tightens them)", len(loose)-i, home)
			break
		}
		what := "file"
		if p.dir {
			what = "directory"
		}
		add("home.modes", "warn", "%s %s has mode %04o, want %04o: other users can reach what conch keeps there", what, p.path, p.mode, p.want)
	}
}

// fixModes tightens what looseModes finds and says what it did.
func fixModes(home string) ([]string, error) {
	var done []string
	for _, p := range looseModes(home, nil) {
		if err := os.Chmod(p.path, p.want); err != nil {
			return done, err
		}
		done = append(done, fmt.Sprintf("home.modes: %s 0%o -> 0%o", p.path, p.mode, p.want))
	}
	return done, nil
}
