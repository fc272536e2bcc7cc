package sandbox

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// The host's git reads configuration from many places (the system's
// file or $GIT_CONFIG_SYSTEM, $GIT_CONFIG_GLOBAL or ~/.gitconfig and
// $XDG_CONFIG_HOME/git/config, the repository's config and
// config.worktree, $GIT_CONFIG_COUNT/KEY_n/VALUE_n, and every file an
// include.path or includeIf.*.path names, under conditions on the git
// directory, the branch or the remotes), and many keys name a program it
// runs or a file it reads as code. Rather than resolve that again here,
// conch asks the host's git, with the gateway's environment, what it
// reads (gitConfigRefs), and protects every file of the chain and every
// workspace path such a key names. The keys are classified in
// gitkeys.txt, checked against `git help --config` by a test.

//go:embed gitkeys.txt
var gitKeysText string

// KeyClass says what a git configuration key's value is to the sandbox.
type KeyClass string

// The classes of gitkeys.txt (described there).
const (
	ClassProgram KeyClass = "program"
	ClassHooks   KeyClass = "hooks"
	ClassConfig  KeyClass = "config"
	ClassRead    KeyClass = "read"
	ClassRepo    KeyClass = "repo"
	ClassData    KeyClass = "data"
	ClassScoped  KeyClass = "scoped"
	ClassPlain   KeyClass = "plain"
)

// GitKeys returns gitkeys.txt: each key as git documents it
// (diff.<driver>.textconv, alias.*) and its class.
func GitKeys() map[string]KeyClass { return gitKeyTable().raw }

type keyTable struct {
	raw  map[string]KeyClass // as written
	norm map[string]KeyClass // normKey of each
}

var gitKeyTable = sync.OnceValue(func() keyTable {
	t := keyTable{raw: map[string]KeyClass{}, norm: map[string]KeyClass{}}
	for _, line := range strings.Split(gitKeysText, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		k, c, ok := strings.Cut(line, "\t")
		if !ok {
			panic("sandbox: gitkeys.txt: no class on line " + line)
		}
		t.raw[k] = KeyClass(c)
		t.norm[normKey(k)] = KeyClass(c)
	}
	return t
})

// normKey lowercases a documented key and writes each placeholder
// (<driver>, *) as <>.
func normKey(k string) string {
	parts := strings.Split(strings.ToLower(k), ".")
	for i, p := range parts {
		if p == "*" || strings.HasPrefix(p, "<") && strings.HasSuffix(p, ">") {
			parts[i] = "<>"
		}
	}
	return strings.Join(parts, ".")
}

// GitKeyClass returns the class of a key as `git config --list` prints
// it (section and name lowercased, the subsection as written:
// diff.Foo.textconv). Keys git does not document are plain.
func GitKeyClass(key string) KeyClass {
	t := gitKeyTable().norm
	first, last := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
	if first < 0 {
		return ClassPlain
	}
	sec, name := strings.ToLower(key[:first]), strings.ToLower(key[last+1:])
	c, ok := t[strings.ToLower(key)] // gpg.ssh.program: a fixed subsection
	switch {
	case ok:
	case first == last:
		if c, ok = t[sec+"."+name]; !ok {
			c, ok = t[sec+".<>"] // alias.*, pager.<cmd>
		}
	default:
		if c, ok = t[sec+".<>."+name]; !ok && t[sec+".<>.<>"] == ClassScoped {
			c, ok = t[sec+"."+name] // credential.<url>.helper
		}
	}
	if !ok || c == ClassScoped {
		return ClassPlain
	}
	return c
}

// gitRef is a path the host's git configuration names: a file of the
// configuration chain, a hooks directory, a program.
type gitRef struct {
	path string // absolute, as git would open it
	dir  bool   // a directory (when it has to be made)
	make bool   // made empty when missing, so it can be mounted
	repo bool   // a git directory (protected as the workspace's own are)
	key  string // what names it, for messages
	// soft: a path no key names (git's default programs): one that
	// passes through a symbolic link in the workspace is skipped, not a
	// failed run (the run's PATH warning covers it).
	soft bool
}

// gitConfigEntry is one line of `git config --list --show-origin
// --show-scope -z`.
type gitConfigEntry struct {
	scope, origin, key, value string
}

// gitBin is the git the host runs; "" when there is none (nothing to
// protect from). A variable for the tests.
var gitBin = sync.OnceValue(func() string {
	p, err := exec.LookPath("git")
	if err != nil {
		return ""
	}
	return p
})

// gitRepoEnv are the variables that choose a repository rather than a
// configuration: dropped from the environment git is asked with (conch
// names the git directory itself).
var gitRepoEnv = []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
	"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_NAMESPACE", "GIT_PREFIX"}

// gitEnv is the environment git is asked with: the gateway's own (the
// user's, for a gateway the user started), without the variables of
// gitRepoEnv.
func gitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, r := range gitRepoEnv {
			if k == r {
				drop = true
			}
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}

func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// listGitConfig runs git config --list in dir with env and extra
// arguments (--file F) and parses its output.
func listGitConfig(dir string, env []string, extra ...string) ([]gitConfigEntry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// safe.directory: git skips the configuration of a repository owned
	// by another user (a root gateway, a user's workspace); that user's
	// git reads it.
	args := append([]string{"-c", "safe.directory=*", "config", "--list", "--show-origin", "--show-scope", "-z"}, extra...)
	cmd := exec.CommandContext(ctx, gitBin(), args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git config --list %s: %w: %s", strings.Join(extra, " "), err, strings.TrimSpace(stderr.String()))
	}
	f := strings.Split(string(out), "\x00")
	var es []gitConfigEntry
	for i := 0; i+2 < len(f); i += 3 {
		k, v, _ := strings.Cut(f[i+2], "\n")
		es = append(es, gitConfigEntry{scope: f[i], origin: f[i+1], key: k, value: v})
	}
	return es, nil
}

// gitConfigRefs asks the host's git what it reads for the worktree top
// whose git directory is gd (gd "": only the system's and the user's
// configuration), and returns every file of that configuration and
// every path its keys name (gitkeys.txt). A file an include names is
// read too (by git, with --file) whatever its condition says now, and so
// are the files it names in turn: the command could make the condition
// true (a branch, a remote) or the file appear.
func gitConfigRefs(top, gd string) ([]gitRef, error) {
	if gitBin() == "" {
		return nil, nil
	}
	env := gitEnv()
	home := envValue(env, "HOME")
	dir := top
	if gd != "" {
		env = append(env, "GIT_DIR="+gd)
	} else {
		dir = "/"
	}
	var refs []gitRef
	listed := map[string]bool{} // files whose keys are known
	queued := map[string]bool{}
	var queue []string // files to read with --file
	file := func(p, key string) {
		p = filepath.Clean(p)
		refs = append(refs, gitRef{path: p, make: true, key: key})
		if !queued[p] {
			queued[p] = true
			queue = append(queue, p)
		}
	}
	// The files of the chain that may not exist yet: git reads them when
	// they appear.
	if v := envValue(env, "GIT_CONFIG_NOSYSTEM"); !gitTrue(v) {
		if s := envValue(env, "GIT_CONFIG_SYSTEM"); s != "" {
			file(s, "$GIT_CONFIG_SYSTEM")
		} else {
			file("/etc/gitconfig", "the system's configuration")
		}
	}
	if g := envValue(env, "GIT_CONFIG_GLOBAL"); g != "" {
		file(g, "$GIT_CONFIG_GLOBAL")
	} else if home != "" {
		x := envValue(env, "XDG_CONFIG_HOME")
		if x == "" {
			x = filepath.Join(home, ".config")
		}
		file(filepath.Join(x, "git", "config"), "the user's configuration")
		file(filepath.Join(home, ".gitconfig"), "the user's configuration")
	}
	// A configuration git cannot read fails the run: git on the host
	// fails too now, but a file of it the command could rewrite later
	// would not be known.
	es, err := listGitConfig(dir, env)
	if err != nil {
		return nil, err
	}
	visit := func(es []gitConfigEntry, from string) {
		for _, e := range es {
			origin := from
			if p, ok := strings.CutPrefix(e.origin, "file:"); ok {
				if !filepath.IsAbs(p) {
					p = filepath.Join(dir, p)
				}
				origin = filepath.Clean(p)
				listed[origin] = true
				if !queued[origin] {
					file(origin, "a file git reads as configuration")
				}
			}
			for _, r := range keyRefs(e, origin, top, home, env) {
				if GitKeyClass(e.key) == ClassConfig {
					file(r.path, e.key)
					continue
				}
				refs = append(refs, r)
			}
		}
	}
	visit(es, "")
	// The environment's own programs and directories (GIT_SSH_COMMAND,
	// GIT_PAGER, GIT_EXEC_PATH, …): the same as their keys.
	for name, key := range gitEnvKeys {
		if v := envValue(env, name); v != "" {
			refs = append(refs, keyRefs(gitConfigEntry{scope: "env", key: key, value: v}, "", top, home, env)...)
		}
	}
	// The programs git runs from PATH when no key names one (its
	// default pager, editor, ssh, gpg): a PATH directory inside the
	// workspace would let the command plant them. Those present are
	// protected like a named program; a missing one is not made (an
	// empty file in your bin directory would show in git status), and
	// the run's result warns of the directory (PathWarning).
	for _, d := range filepath.SplitList(envValue(env, "PATH")) {
		if !filepath.IsAbs(d) {
			continue
		}
		for _, prog := range gitDefaultPrograms {
			refs = append(refs, gitRef{path: filepath.Join(d, prog), key: "git's default program " + prog, soft: true})
		}
	}
	// Every file an include names that git did not read now, as git
	// reads it on its own (the includes in it too). Bounded: git itself
	// stops at a depth of 10.
	for n := 0; len(queue) > 0 && n < 500; n++ {
		f := queue[0]
		queue = queue[1:]
		if listed[f] {
			continue
		}
		listed[f] = true
		if fi, err := os.Stat(f); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		es, err := listGitConfig("/", env, "--file", f)
		if err != nil {
			continue // git fails on it too when it reads it
		}
		visit(es, f)
	}
	return refs, nil
}

// gitDirValid reports whether git takes gd for a git directory (as its
// is_git_directory does): a HEAD file, and objects/ and refs/
// directories or a commondir file naming where they are. One git does
// not take is not asked about: git reads no configuration from it.
func gitDirValid(gd string) bool {
	if fi, err := os.Stat(filepath.Join(gd, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if _, err := os.Lstat(filepath.Join(gd, "commondir")); err == nil {
		return true
	}
	for _, d := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(gd, d)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// enclosingRepo returns the worktree top and git directory of the
// repository git finds from dir (ok false for none, or without git).
func enclosingRepo(dir string) (top, gd string, ok bool) {
	if gitBin() == "" {
		return "", "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gitBin(), "-c", "safe.directory=*", "rev-parse", "--absolute-git-dir", "--show-toplevel")
	cmd.Dir, cmd.Env = dir, gitEnv()
	out, err := cmd.Output()
	if err != nil {
		return "", "", false
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !filepath.IsAbs(lines[0]) || !filepath.IsAbs(lines[1]) {
		return "", "", false
	}
	return lines[1], lines[0], true
}

// gitDefaultPrograms are the programs git runs by name from PATH when no
// key or variable names one: the pager (less), the editor (vi), ssh for
// ssh remotes, gpg, gpgsm and ssh-keygen for signatures, man for git help.
var gitDefaultPrograms = []string{"less", "vi", "ssh", "gpg", "gpgsm", "ssh-keygen", "man"}

// PathWarning is the warning of a sandboxed run whose workspace holds a
// directory of the gateway's PATH (or when PATH has a relative entry,
// which is inside the workspace whenever your shell's working directory
// is): a command there can plant programs that your shell and git (its
// pager, editor, ssh, gpg) run on the host. "" when it holds none.
func PathWarning(ws string) string {
	wsReal, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return ""
	}
	var in []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if d == "" || !filepath.IsAbs(d) {
			in = append(in, strconv.Quote(d)+" (relative)")
			continue
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			real = filepath.Clean(d) // missing now: the command could make it
		}
		if _, inside := Within(wsReal, real); inside {
			in = append(in, d)
		}
	}
	if len(in) == 0 {
		return ""
	}
	return fmt.Sprintf("Warning: the gateway's PATH holds %s, inside the workspace: a sandboxed command can put programs there that your shell and git (its pager less, editor vi, ssh, gpg) run on the host; conch protects only the programs present there when a run starts. Keep workspace directories out of PATH.", strings.Join(in, ", "))
}

// gitEnvKeys are the environment variables git takes a program or a
// directory from, and the key of gitkeys.txt each stands for.
var gitEnvKeys = map[string]string{
	"GIT_SSH": "core.sshCommand", "GIT_SSH_COMMAND": "core.sshCommand", "GIT_EDITOR": "core.editor",
	"GIT_SEQUENCE_EDITOR": "sequence.editor", "GIT_PAGER": "core.pager", "GIT_ASKPASS": "core.askPass",
	"SSH_ASKPASS": "core.askPass", "GIT_EXTERNAL_DIFF": "diff.external", "GIT_PROXY_COMMAND": "core.gitProxy",
	"EDITOR": "core.editor", "VISUAL": "core.editor", "PAGER": "core.pager",
	"GIT_EXEC_PATH": "core.hooksPath", "GIT_TEMPLATE_DIR": "init.templateDir",
}

// gitTrue is git's boolean truth for an environment variable.
func gitTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// keyRefs returns the paths one configuration entry names (its class in
// gitkeys.txt): origin is the file it came from ("" for the command
// line), top the worktree git runs in.
func keyRefs(e gitConfigEntry, origin, top, home string, env []string) []gitRef {
	v := e.value
	switch GitKeyClass(e.key) {
	case ClassConfig:
		p, ok := gitPath(v, filepath.Dir(origin), home)
		if !ok || origin == "" && !filepath.IsAbs(p) {
			return nil
		}
		return []gitRef{{path: p, make: true, key: e.key}}
	case ClassHooks:
		if p, ok := gitPath(v, top, home); ok {
			return []gitRef{{path: p, dir: true, make: true, key: e.key}}
		}
	case ClassRead:
		if p, ok := gitPath(v, top, home); ok {
			return []gitRef{{path: p, dir: strings.EqualFold(e.key, "init.templatedir"), make: true, key: e.key}}
		}
	case ClassProgram:
		return programRefs(e.key, v, top, home, env)
	case ClassRepo:
		// A local path (file:///x, /x, ../x; not host:path or a URL):
		// the git directory git pushes into and runs the hooks of.
		if cmd, ok := strings.CutPrefix(v, "ext::"); ok {
			// git's ext transport runs the rest as a command (where
			// protocol.ext.allow lets it).
			return programRefs(e.key, cmd, top, home, env)
		}
		if u, ok := strings.CutPrefix(v, "file://"); ok {
			v = u
		} else if strings.Contains(v, "://") || strings.Contains(strings.SplitN(v, "/", 2)[0], ":") {
			return nil
		}
		if p, ok := gitPath(v, top, home); ok {
			for _, gd := range []string{p, filepath.Join(p, ".git")} {
				if gitDirValid(gd) {
					return []gitRef{{path: gd, dir: true, repo: true, key: e.key}}
				}
			}
		}
	}
	return nil
}

// gitPath expands a pathname value as git does (~/, ~user/; relative to
// base). ok is false for an empty one or one git resolves elsewhere
// (%(prefix)/: git's install directory).
func gitPath(v, base, home string) (string, bool) {
	switch {
	case v == "" || strings.HasPrefix(v, "%(prefix)/"):
		return "", false
	case v == "~" || strings.HasPrefix(v, "~/"):
		if home == "" {
			return "", false
		}
		return filepath.Join(home, v[1:]), true
	case strings.HasPrefix(v, "~"):
		name, rest, _ := strings.Cut(v[1:], "/")
		u, err := user.Lookup(name)
		if err != nil {
			return "", false
		}
		return filepath.Join(u.HomeDir, rest), true
	case filepath.IsAbs(v):
		return filepath.Clean(v), true
	case base == "" || base == ".":
		return "", false
	}
	return filepath.Join(base, v), true
}

// programRefs returns the paths in a command value: every word with a
// slash (made empty when missing: an empty file runs nothing), and the
// words without one that name an existing file of the worktree or, for
// the program itself, of a PATH directory. Booleans (core.fsmonitor =
// true: git's own daemon) name nothing. The words are split at blanks
// and shell punctuation, a superset of what a shell would run.
func programRefs(key, v, top, home string, env []string) []gitRef {
	if _, err := parseGitBool(v); err == nil {
		return nil
	}
	v = strings.TrimSpace(v)
	// An alias or a submodule's update is a shell command only with a
	// leading "!" (otherwise git arguments, or an update mode).
	lk := strings.ToLower(key)
	if strings.HasPrefix(lk, "alias.") && !strings.HasPrefix(v, "!") {
		return aliasRefs(v, top, home, env)
	}
	if strings.HasPrefix(lk, "submodule.") && strings.HasSuffix(lk, ".update") && !strings.HasPrefix(v, "!") {
		return nil
	}
	v = strings.TrimPrefix(v, "!")
	words := strings.FieldsFunc(v, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(";|&()<>`'\"=,", r)
	})
	// And the words as the shell git runs the value with reads them:
	// quoted ('tools/my hook'), escaped, with $PWD, $HOME or ${VAR} of
	// the environment expanded, and the words of a script given to a
	// shell inside it (sh -c '…'), one level down.
	// A word with blanks in it is a path when it is the command (made
	// empty when missing, like the rest) and otherwise when it exists.
	var out []gitRef
	pwdEnv := append(slices.Clip(env), "PWD="+top)
	var collect func(v string, depth int)
	collect = func(v string, depth int) {
		for _, sw := range shellWords(v, pwdEnv) {
			if depth < 2 && strings.ContainsAny(sw.w, " \t\n;|&") {
				collect(sw.w, depth+1)
			}
			w := sw.w
			if strings.Contains(w, "=") && !sw.cmd || strings.HasPrefix(w, "-") || w == "" {
				continue
			}
			if !strings.ContainsAny(w, " \t\n") {
				words = append(words, w)
				continue
			}
			if p, ok := gitPath(w, top, home); ok {
				out = append(out, gitRef{path: p, make: sw.cmd, key: key})
			}
		}
	}
	collect(v, 0)
	for i, w := range words {
		if strings.HasPrefix(w, "-") || strings.Contains(w, "$") {
			continue
		}
		if strings.Contains(w, "/") || strings.HasPrefix(w, "~") {
			if p, ok := gitPath(w, top, home); ok {
				out = append(out, gitRef{path: p, make: true, key: key})
			}
			continue
		}
		out = append(out, gitRef{path: filepath.Join(top, w), key: key})
		if i == 0 {
			for _, d := range filepath.SplitList(envValue(env, "PATH")) {
				if filepath.IsAbs(d) {
					out = append(out, gitRef{path: filepath.Join(d, w), key: key})
				}
			}
		}
	}
	return out
}

// aliasRefs returns the paths an alias that is not a shell command
// names through the configuration it gives git (-c key=value,
// --config-env=key=VAR): `st = -c core.fsmonitor=tools/fsmon status`.
func aliasRefs(v, top, home string, env []string) []gitRef {
	var args []string
	for _, w := range shellWords(v, nil) {
		args = append(args, w.w)
	}
	var out []gitRef
	for i, a := range args {
		kv, ok := "", false
		switch {
		case a == "-c" && i+1 < len(args):
			kv, ok = args[i+1], true
		case strings.HasPrefix(a, "--config-env="):
			k, name, found := strings.Cut(strings.TrimPrefix(a, "--config-env="), "=")
			kv, ok = k+"="+envValue(env, name), found
		}
		if k, val, found := strings.Cut(kv, "="); ok && found {
			out = append(out, keyRefs(gitConfigEntry{scope: "command", key: k, value: val}, "", top, home, env)...)
		}
	}
	return out
}

// shellWords splits v into words as a POSIX shell would before running
// it: blanks and operators (; | & ( ) < >) separate, single and double
// quotes and backslashes quote, and $NAME and ${NAME} take their values
// from env (nil: kept as written); a command substitution ($(…), `…`)
// is taken for $PWD (the top: `$(git rev-parse --show-toplevel)/bin/x`).
// A word with another expansion the shell would compute is left out. Used to
// find paths, as a superset together with the plain split.
func shellWords(v string, env []string) []shellWord {
	var out []shellWord
	var cur strings.Builder
	in, bad, cmd, assign := false, false, true, false
	wrapped := false // after a wrapper: every word may be the command
	end := func() {
		if in && !bad {
			out = append(out, shellWord{w: cur.String(), cmd: cmd && !assign})
		}
		if in {
			// FOO=bar cmd, env cmd, exec cmd, nice -n 5 cmd: cmd is the
			// command; after a wrapper every word is taken for it (only
			// a word with blanks depends on this).
			if cmd && !assign && shellWrappers[filepath.Base(cur.String())] {
				wrapped = true
			}
			cmd = cmd && assign || wrapped
		}
		cur.Reset()
		in, bad, assign = false, false, false
	}
	param := func(i int) int { // v[i] == '$': expands it, returns the index after it
		if env == nil {
			cur.WriteByte('$')
			return i + 1
		}
		j := i + 1
		name := ""
		switch {
		case j < len(v) && v[j] == '(' && !strings.HasPrefix(v[j:], "(("):
			// $(git rev-parse --show-toplevel), $(pwd): taken for the
			// top, what such a value names in practice (a superset:
			// the word is read as written too, and dropped).
			depth := 0
			for k := j; k < len(v); k++ {
				if v[k] == '(' {
					depth++
				} else if v[k] == ')' {
					if depth--; depth == 0 {
						cur.WriteString(envValue(env, "PWD"))
						return k + 1
					}
				}
			}
			bad = true
			return len(v)
		case j < len(v) && v[j] == '{':
			k := strings.IndexByte(v[j:], '}')
			if k < 0 {
				bad = true
				return len(v)
			}
			name = v[j+1 : j+k]
			j += k + 1
		default:
			for j < len(v) && (v[j] == '_' || v[j] >= 'a' && v[j] <= 'z' || v[j] >= 'A' && v[j] <= 'Z' || v[j] >= '0' && v[j] <= '9' && j > i+1) {
				j++
			}
			name = v[i+1 : j]
		}
		if name == "" || strings.ContainsAny(name, ":-=+?#%/") {
			bad = true // $(…), $?, ${x:-y}: not computed here
			return max(j, i+1)
		}
		cur.WriteString(envValue(env, name))
		return j
	}
	backquote := func(i int) int { // v[i] == '`': `pwd` is taken for the top, like $(…)
		k := strings.IndexByte(v[i+1:], '`')
		if k < 0 || env == nil {
			bad = true
			return len(v)
		}
		cur.WriteString(envValue(env, "PWD"))
		return i + k + 2
	}
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			end()
			i++
		case strings.IndexByte(";|&()<>", c) >= 0:
			end()
			cmd, wrapped = strings.IndexByte(";|&(", c) >= 0, false
			i++
		case c == '\'':
			in = true
			k := strings.IndexByte(v[i+1:], '\'')
			if k < 0 {
				bad = true
				k = len(v) - i - 1
			}
			cur.WriteString(v[i+1 : i+1+k])
			i += k + 2
		case c == '"':
			in = true
			i++
			for i < len(v) && v[i] != '"' {
				switch {
				case v[i] == '\\' && i+1 < len(v) && strings.IndexByte("$`\"\\\n", v[i+1]) >= 0:
					cur.WriteByte(v[i+1])
					i += 2
				case v[i] == '$':
					i = param(i)
				case v[i] == '`':
					i = backquote(i)
				default:
					cur.WriteByte(v[i])
					i++
				}
			}
			i++
		case c == '\\':
			in = true
			if i+1 < len(v) {
				cur.WriteByte(v[i+1])
			}
			i += 2
		case c == '$':
			in = true
			i = param(i)
		case c == '`':
			in = true
			i = backquote(i)
		default:
			if c == '=' && !in {
				bad = true // =x: not an assignment
			}
			if c == '=' && cmd && cur.Len() > 0 && !strings.ContainsAny(cur.String(), "/'\"") {
				assign = true
			}
			in = true
			cur.WriteByte(c)
			i++
		}
	}
	end()
	return out
}

// shellWrappers run the command their arguments name.
var shellWrappers = map[string]bool{"env": true, "exec": true, "command": true, "nice": true, "nohup": true,
	"time": true, "timeout": true, "stdbuf": true, "ionice": true, "setsid": true, "sudo": true, "doas": true,
	"xargs": true, "chrt": true, "taskset": true, "unbuffer": true, "builtin": true}

// shellWord is one word of shellWords; cmd says it is in the place of
// the command (the first word of a simple command, after assignments).
type shellWord struct {
	w   string
	cmd bool
}

func parseGitBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "on", "1", "":
		return true, nil
	case "false", "no", "off", "0":
		return false, nil
	}
	return false, errors.New("not a boolean")
}

// ErrLinkInWorkspace: a path git's configuration names passes through
// a symbolic link inside the workspace, which the command could point
// elsewhere.
var ErrLinkInWorkspace = errors.New("passes through a symbolic link in the workspace")

// resolveIn follows p (absolute) as the host's git would open it and
// returns it relative to the real workspace wsReal; inside is false when
// it lies outside. A symbolic link inside the workspace on the way fails
// (ErrLinkInWorkspace); links outside it are followed. A missing part
// ends the walk: the rest is taken as written.
func resolveIn(wsReal, p string) (rel string, inside bool, err error) {
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	cur := "/"
	for i, hops := 0, 0; i < len(parts); i++ {
		if parts[i] == "" {
			continue
		}
		next := filepath.Join(cur, parts[i])
		fi, err := os.Lstat(next)
		if err != nil {
			cur = filepath.Join(append([]string{cur}, parts[i:]...)...)
			break
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if _, in := Within(wsReal, cur); in {
			return "", false, fmt.Errorf("%s: %s %w; remove it on the host", p, next, ErrLinkInWorkspace)
		}
		if hops++; hops > 40 {
			return "", false, fmt.Errorf("%s: too many symbolic links", p)
		}
		t, err := os.Readlink(next)
		if err != nil {
			return "", false, err
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(cur, t)
		}
		parts = append(strings.Split(strings.TrimPrefix(filepath.Clean(t), "/"), "/"), parts[i+1:]...)
		cur, i = "/", -1
	}
	rel, inside = Within(wsReal, cur)
	return rel, inside && rel != ".", nil
}
