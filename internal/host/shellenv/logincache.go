//go:build unix

package shellenv

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/conchsh/conch/internal/base/fsutil"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// loginCacheVersion changes when the key or the file changes meaning.
const loginCacheVersion = 1

// loginCache is the cache file of the login-shell probe.
type loginCache struct {
	V        int    `json:"v"`
	Key      string `json:"key"`
	Path     string `json:"path"`
	Error    string `json:"error,omitempty"`
	ProbedAt int64  `json:"probedAt"` // unix ms
}

// profileFiles are the start-up files a login shell (sh, dash, bash, zsh,
// ksh, fish) of this user may read, relative to the home when not
// absolute. A directory stands for the files in it.
var profileFiles = []string{
	"/etc/profile", "/etc/profile.d", "/etc/environment", "/etc/bash.bashrc", "/etc/bashrc",
	"/etc/zshenv", "/etc/zprofile", "/etc/zshrc", "/etc/zlogin", "/etc/zsh",
	"/etc/fish/config.fish", "/etc/fish/conf.d", "/etc/paths", "/etc/paths.d",
	".profile", ".bash_profile", ".bash_login", ".bashrc", ".bash_logout",
	".zshenv", ".zprofile", ".zshrc", ".zlogin", ".zlogout", ".kshrc", ".mkshrc", ".shrc",
	".config/fish/config.fish", ".config/fish/conf.d",
}

// loginKey names what the probe's result depends on: the user, the home,
// the shell (path and binary), the PATH it inherits, and the identity
// (inode, size, modification time) of every start-up file, present or
// not, one directory level deep. A file a profile sources from elsewhere
// is not part of it (hence the cache's lifetime).
func loginKey(shell string) string {
	home, _ := os.UserHomeDir()
	var b strings.Builder
	fmt.Fprintf(&b, "v%d\x00uid=%d\x00home=%s\x00shell=%s\x00%s\x00path=%s\x00", loginCacheVersion, os.Getuid(), home, shell,
		fileID(shell), os.Getenv("PATH"))
	for _, f := range profileFiles {
		if !filepath.IsAbs(f) {
			if home == "" {
				continue
			}
			f = filepath.Join(home, f)
		}
		fmt.Fprintf(&b, "%s=%s\x00", f, fileID(f))
		if ents, err := os.ReadDir(f); err == nil {
			names := make([]string, 0, len(ents))
			for _, e := range ents {
				names = append(names, e.Name())
			}
			sort.Strings(names)
			for _, n := range names {
				p := filepath.Join(f, n)
				fmt.Fprintf(&b, "%s=%s\x00", p, fileID(p))
			}
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// fileID identifies a file's current content for the key (symlinks
// followed); "-" when it does not exist.
func fileID(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return "-"
	}
	ino := uint64(0)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf("%d:%d:%d:%o", ino, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
}

// readLoginCache returns the cached result when the file exists, is this
// version, has key and is younger than its lifetime.
func readLoginCache(file, key string, now time.Time) (loginCache, bool) {
	var c loginCache
	if file == "" {
		return c, false
	}
	b, err := os.ReadFile(file)
	if err != nil || json.Unmarshal(b, &c) != nil || c.V != loginCacheVersion || c.Key != key {
		return c, false
	}
	ttl := loginCacheTTL
	if c.Error != "" {
		ttl = loginCacheFailTTL
	}
	age := now.Sub(time.UnixMilli(c.ProbedAt))
	return c, age >= 0 && age < ttl
}

// UserLoginCache is the login-probe cache file this user's homes share
// (conch/login-path.json under the user's cache directory, e.g.
// ~/.cache), or "" when the user has no cache directory.
func UserLoginCache() string {
	dir, err := os.UserCacheDir()
	if err != nil || !filepath.IsAbs(dir) {
		return ""
	}
	return filepath.Join(dir, "conch", "login-path.json")
}

// writeLoginCache replaces file with the result (mode 0600).
func writeLoginCache(file, key, path string, perr error, now time.Time) {
	c := loginCache{V: loginCacheVersion, Key: key, Path: path, ProbedAt: now.UnixMilli()}
	if perr != nil {
		c.Error = perr.Error()
	}
	writeLoginCacheEntry(file, c)
}

// writeLoginCacheEntry replaces file with c (mode 0600); "" is no file.
func writeLoginCacheEntry(file string, c loginCache) {
	if file == "" {
		return
	}
	b, err := json.Marshal(c)
	if err != nil {
		return
	}
	if os.MkdirAll(filepath.Dir(file), 0o700) != nil {
		return
	}
	fsutil.Write(file, append(b, '\n'), fsutil.Options{Perm: 0o600, NoSync: true})
}
