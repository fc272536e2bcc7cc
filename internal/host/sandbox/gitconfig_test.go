package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGitKeysClassified: every key the installed git documents (`git
// help --config`) has a class in gitkeys.txt, every class is one the
// sandbox knows, and the keys the table names as programs or paths are
// looked up as such in their concrete spellings.
func TestGitKeysClassified(t *testing.T) {
	if gitBin() == "" {
		t.Skip("git is not installed")
	}
	out, err := exec.Command("git", "help", "--config").Output()
	if err != nil {
		t.Fatalf("git help --config: %v", err)
	}
	table := GitKeys()
	var missing []string
	for _, k := range strings.Fields(string(out)) {
		if _, ok := table[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the installed git knows %d keys gitkeys.txt does not classify (add each with its class: program, hooks, config, read, data, scoped or plain):\n%s",
			len(missing), strings.Join(missing, "\n"))
	}
	valid := []KeyClass{ClassProgram, ClassHooks, ClassConfig, ClassRead, ClassRepo, ClassData, ClassScoped, ClassPlain}
	for k, c := range table {
		if !slices.Contains(valid, c) {
			t.Errorf("gitkeys.txt: %s has the unknown class %q", k, c)
		}
	}
	for key, want := range map[string]KeyClass{
		"core.hookspath": ClassHooks, "core.fsmonitor": ClassProgram, "diff.Foo.textconv": ClassProgram,
		"filter.lfs.process": ClassProgram, "alias.st": ClassProgram, "pager.log": ClassProgram,
		"credential.https://example.com.helper": ClassProgram, "includeif.onbranch:main.path": ClassConfig,
		"include.path": ClassConfig, "core.attributesfile": ClassRead, "user.name": ClassPlain,
		"http.https://example.com.sslcainfo": ClassRead, "nosuch.key": ClassPlain, "credential.https://x.username": ClassPlain,
	} {
		if got := GitKeyClass(key); got != want {
			t.Errorf("GitKeyClass(%q) = %s, want %s", key, got, want)
		}
	}
}

// gitMember is one concrete key of a class that names a path: its
// target (file or directory) when it is made.
type gitMember struct {
	key   string
	class KeyClass
	dir   bool
}

// gitMembers returns a concrete key for every key of gitkeys.txt whose
// value the sandbox protects (placeholders filled in: diff.t.textconv),
// and one of a scoped section (credential.<url>.helper).
func gitMembers() []gitMember {
	ph := regexp.MustCompile(`<[^>]*>|\*`)
	var out []gitMember
	for k, c := range GitKeys() {
		switch c {
		case ClassProgram, ClassHooks, ClassConfig, ClassRead:
			ck := ph.ReplaceAllString(k, "t")
			out = append(out, gitMember{key: ck, class: c, dir: c == ClassHooks || strings.EqualFold(k, "init.templateDir")})
		}
	}
	out = append(out, gitMember{key: "credential.https://example.com/.helper", class: ClassProgram})
	slices.SortFunc(out, func(a, b gitMember) int { return strings.Compare(a.key, b.key) })
	return out
}

// gitSource is one place git reads configuration from. write puts the
// entries kv into it for the repository repo (scratch: a directory
// outside the workspace) and returns the environment that makes git read
// it, and the directory a relative include in it is relative to ("" when
// git takes none: the command line).
type gitSource struct {
	name  string
	write func(t *testing.T, repo, scratch string, kv [][2]string) (env map[string]string, base string)
}

// gitConfigFile writes kv into the configuration file f with git's own
// writer.
func gitConfigFile(t *testing.T, f string, kv [][2]string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(f), 0o755)
	for _, e := range kv {
		if out, err := exec.Command("git", "config", "--file", f, "--add", e[0], e[1]).CombinedOutput(); err != nil {
			t.Fatalf("git config --file %s %s: %v %s", f, e[0], err, out)
		}
	}
}

// includeSource: the entries in a file that include.path (or an
// includeIf with cond) in the repository's config names: in the
// workspace, nested one level deeper when nested.
func includeSource(name, key string, nested bool) gitSource {
	return gitSource{name: name, write: func(t *testing.T, repo, scratch string, kv [][2]string) (map[string]string, string) {
		f := filepath.Join(repo, "conf", "shared.conf")
		if nested {
			gitConfigFile(t, f, [][2]string{{"include.path", "deeper/more.conf"}})
			f = filepath.Join(repo, "conf", "deeper", "more.conf")
		}
		gitConfigFile(t, f, kv)
		k := strings.ReplaceAll(key, "REPO", repo)
		gitConfigFile(t, filepath.Join(repo, ".git", "config"), [][2]string{{k, "../conf/shared.conf"}})
		return nil, filepath.Dir(f)
	}}
}

var gitSources = []gitSource{
	{name: "local", write: func(t *testing.T, repo, scratch string, kv [][2]string) (map[string]string, string) {
		gitConfigFile(t, filepath.Join(repo, ".git", "config"), kv)
		return nil, filepath.Join(repo, ".git")
	}},
	includeSource("include.path", "include.path", false),
	includeSource("include-of-include", "include.path", true),
	includeSource("includeIf-gitdir", "includeIf.gitdir:REPO/.path", false),
	includeSource("includeIf-onbranch-false", "includeIf.onbranch:not-now.path", false),
	includeSource("includeIf-hasconfig-false", "includeIf.hasconfig:remote.*.url:https://nowhere.example/**.path", false),
	{name: "GIT_CONFIG_GLOBAL", write: func(t *testing.T, repo, scratch string, kv [][2]string) (map[string]string, string) {
		f := filepath.Join(scratch, "global.conf")
		gitConfigFile(t, f, kv)
		return map[string]string{"GIT_CONFIG_GLOBAL": f}, scratch
	}},
	{name: "GIT_CONFIG_GLOBAL-in-workspace", write: func(t *testing.T, repo, scratch string, kv [][2]string) (map[string]string, string) {
		f := filepath.Join(repo, "global.conf")
		gitConfigFile(t, f, kv)
		return map[string]string{"GIT_CONFIG_GLOBAL": f}, repo
	}},
	{name: "GIT_CONFIG_SYSTEM", write: func(t *testing.T, repo, scratch string, kv [][2]string) (map[string]string, string) {
		f := filepath.Join(scratch, "system.conf")
		gitConfigFile(t, f, kv)
		return map[string]string{"GIT_CONFIG_SYSTEM": f, "GIT_CONFIG_NOSYSTEM": ""}, scratch
	}},
	{name: "XDG_CONFIG_HOME", write: func(t *testing.T, repo, scratch string, kv [][2]string) (map[string]string, string) {
		gitConfigFile(t, filepath.Join(scratch, "xdg", "git", "config"), kv)
		return map[string]string{"XDG_CONFIG_HOME": filepath.Join(scratch, "xdg")}, filepath.Join(scratch, "xdg", "git")
	}},
	{name: "HOME/.gitconfig", write: func(t *testing.T, repo, scratch string, kv [][2]string) (map[string]string, string) {
		gitConfigFile(t, filepath.Join(scratch, "home", ".gitconfig"), kv)
		return nil, filepath.Join(scratch, "home")
	}},
	{name: "GIT_CONFIG_COUNT", write: func(t *testing.T, repo, scratch string, kv [][2]string) (map[string]string, string) {
		env := map[string]string{"GIT_CONFIG_COUNT": fmt.Sprint(len(kv))}
		for i, e := range kv {
			env[fmt.Sprintf("GIT_CONFIG_KEY_%d", i)] = e[0]
			env[fmt.Sprintf("GIT_CONFIG_VALUE_%d", i)] = e[1]
		}
		return env, ""
	}},
}

// TestGitConfigIndirection generates the ways git's configuration can
// name a path of the workspace: every configuration source git reads
// (gitSources) × every key the sandbox protects (gitkeys.txt: programs,
// hooks directories, included files, files read as code) × the target
// missing, a file or a directory × its value absolute or relative. The
// sandbox's protected set must hold every target, and a missing one must
// have been made (an empty file, or a directory for hooks and
// templates), so that the read-only mount keeps the command from making
// it.
func TestGitConfigIndirection(t *testing.T) {
	if gitBin() == "" {
		t.Skip("git is not installed")
	}
	members := gitMembers()
	if len(members) < 40 {
		t.Fatalf("only %d program and path keys in gitkeys.txt", len(members))
	}
	for _, src := range gitSources {
		for _, state := range []string{"missing", "file", "dir"} {
			for _, form := range []string{"absolute", "relative"} {
				name := src.name + "/" + state + "/" + form
				root := t.TempDir()
				ws, scratch := filepath.Join(root, "ws"), filepath.Join(root, "scratch")
				os.MkdirAll(scratch, 0o755)
				if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
					t.Fatalf("git init: %v %s", err, out)
				}
				env := map[string]string{"HOME": filepath.Join(scratch, "home"), "GIT_CONFIG_NOSYSTEM": "1",
					"XDG_CONFIG_HOME": "", "GIT_CONFIG_GLOBAL": "", "GIT_CONFIG_SYSTEM": "", "GIT_CONFIG_COUNT": ""}
				// Where each member points, and which it keeps (a
				// relative include from the command line is refused by
				// git itself; an included directory makes git fail).
				targets := map[string]string{}
				var kv [][2]string
				_, base := src.write(t, ws, scratch, nil)
				for i, m := range members {
					if m.class == ClassConfig && (state == "dir" || form == "relative" && base == "") {
						continue
					}
					target := filepath.Join(ws, "t", fmt.Sprintf("%02d-%s", i, strings.ReplaceAll(m.key, "/", "_")))
					v := target
					if form == "relative" {
						from := ws // hooks, programs, read: the worktree
						if m.class == ClassConfig {
							from = base
						}
						rel, err := filepath.Rel(from, target)
						if err != nil {
							t.Fatal(err)
						}
						if m.class == ClassProgram && !strings.Contains(rel, "/") {
							rel = "./" + rel
						}
						v = rel
					}
					if m.class == ClassProgram && strings.HasPrefix(m.key, "alias.") || m.key == "submodule.t.update" {
						v = "!" + v + " --flag"
					}
					switch state {
					case "file":
						os.MkdirAll(filepath.Dir(target), 0o755)
						os.WriteFile(target, nil, 0o755)
					case "dir":
						os.MkdirAll(target, 0o755)
					}
					targets[m.key] = target
					kv = append(kv, [2]string{m.key, v})
				}
				e, _ := src.write(t, ws, scratch, kv)
				for k, v := range e {
					env[k] = v
				}
				for k, v := range env {
					t.Setenv(k, v)
					if v == "" {
						os.Unsetenv(k)
					}
				}
				// gitAccess changes only what of .git is mounted: "rw"
				// once per source, where the targets are made.
				accesses := []string{"ro"}
				if state == "missing" && form == "absolute" {
					accesses = append(accesses, "rw")
				}
				for _, access := range accesses {
					got, err := GitProtected("", ws, access)
					if err != nil {
						t.Fatalf("%s %s: %v", name, access, err)
					}
					covered := func(rel string) bool {
						for _, g := range got {
							if _, ok := Within(g, rel); ok {
								return true
							}
						}
						return false
					}
					for _, m := range members {
						target, ok := targets[m.key]
						if !ok {
							continue
						}
						rel, _ := Within(ws, target)
						if !covered(rel) {
							t.Errorf("%s gitAccess %s: %s = %s: %s is not protected", name, access, m.key, kv[slices.IndexFunc(kv, func(x [2]string) bool { return x[0] == m.key })][1], rel)
							continue
						}
						fi, err := os.Lstat(target)
						if err != nil {
							t.Errorf("%s gitAccess %s: %s: %s was not made: %v", name, access, m.key, rel, err)
						} else if state == "missing" && fi.IsDir() != m.dir {
							t.Errorf("%s gitAccess %s: %s: %s made as dir=%v, want dir=%v", name, access, m.key, rel, fi.IsDir(), m.dir)
						}
					}
					if src.name == "GIT_CONFIG_GLOBAL-in-workspace" && !covered("global.conf") {
						t.Errorf("%s gitAccess %s: the global configuration file in the workspace is not protected: %v", name, access, got)
					}
					if strings.HasPrefix(src.name, "include") && !covered("conf/shared.conf") {
						t.Errorf("%s gitAccess %s: the included file is not protected: %v", name, access, got)
					}
				}
			}
		}
	}
}

// TestGitEnclosingRepository: a workspace that is a subdirectory of a
// checkout of the host's: git run in it reads that repository's
// configuration, whose hooks directory and programs may lie in the
// workspace.
func TestGitEnclosingRepository(t *testing.T) {
	if gitBin() == "" {
		t.Skip("git is not installed")
	}
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("HOME", t.TempDir())
	parent := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", parent).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	gitConfigFile(t, filepath.Join(parent, ".git", "config"), [][2]string{{"core.hooksPath", "sub/.githooks"}, {"core.fsmonitor", "sub/tools/fsm"}, {"core.pager", "outside/pager"}})
	ws := filepath.Join(parent, "sub")
	os.MkdirAll(ws, 0o755)
	got, err := GitProtected("", ws, "ro")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".githooks", "tools/fsm"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s not protected: %v", want, got)
		}
	}
	if len(got) != 2 {
		t.Errorf("protected %v, want only the two paths in the workspace", got)
	}
}

// TestGitConfigUnreadable: a configuration git cannot read (a broken
// file an include names in the workspace) fails the run rather than
// leaving that file writable; a directory git does not take for a
// repository (no objects/) is not asked about and fails nothing.
func TestGitConfigUnreadable(t *testing.T) {
	if gitBin() == "" {
		t.Skip("git is not installed")
	}
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("HOME", t.TempDir())
	ws := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	gitConfigFile(t, filepath.Join(ws, ".git", "config"), [][2]string{{"include.path", "../shared.conf"}})
	os.WriteFile(filepath.Join(ws, "shared.conf"), []byte("[core\n"), 0o644)
	if got, err := GitProtected("", ws, "rw"); err == nil {
		t.Fatalf("a broken included file: protected %v, want an error", got)
	}
	os.WriteFile(filepath.Join(ws, "shared.conf"), nil, 0o644)
	os.MkdirAll(filepath.Join(ws, "junk", ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, "junk", ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "junk", ".git", "config"), []byte("[core\n"), 0o644)
	if got, err := GitProtected("", ws, "rw"); err != nil || !slices.Contains(got, "shared.conf") {
		t.Fatalf("a junk .git: %v %v", got, err)
	}
}

// BenchmarkGitProtected measures what asking git costs a run's start:
// GitProtected on a workspace with one repository whose configuration
// includes a file, with git asked (ask) and, as the baseline in the same
// run, without (no git on PATH: the repository search alone).
//
//	go test ./internal/host/sandbox -run '^$' -bench GitProtected
func BenchmarkGitProtected(b *testing.B) {
	if gitBin() == "" {
		b.Skip("git is not installed")
	}
	b.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	b.Setenv("HOME", b.TempDir())
	ws := b.TempDir()
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v %s", err, out)
	}
	exec.Command("git", "-C", ws, "config", "include.path", "../shared.conf").Run()
	os.WriteFile(filepath.Join(ws, "shared.conf"), []byte("[core]\n\thooksPath = .githooks\n"), 0o644)
	real := gitBin
	for _, mode := range []string{"baseline", "ask"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "baseline" {
				gitBin = func() string { return "" }
				defer func() { gitBin = real }()
			}
			for i := 0; i < b.N; i++ {
				if _, err := GitProtected("", ws, "ro"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestGitEnvPrograms: the variables git takes a program or a directory
// from (gitEnvKeys) protect what they name in the workspace like the
// keys they stand for.
func TestGitEnvPrograms(t *testing.T) {
	if gitBin() == "" {
		t.Skip("git is not installed")
	}
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("HOME", t.TempDir())
	ws := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	want := map[string]bool{}
	for name, key := range gitEnvKeys {
		rel := "env/" + name
		dir := GitKeyClass(key) == ClassHooks || key == "init.templateDir"
		t.Setenv(name, filepath.Join(ws, rel)+" --arg")
		if dir {
			t.Setenv(name, filepath.Join(ws, rel))
		}
		want[rel] = dir
	}
	got, err := GitProtected("", ws, "rw")
	if err != nil {
		t.Fatal(err)
	}
	for rel, dir := range want {
		if !slices.Contains(got, rel) {
			t.Errorf("%s not protected: %v", rel, got)
		}
		if fi, err := os.Lstat(filepath.Join(ws, rel)); err != nil || fi.IsDir() != dir {
			t.Errorf("%s not made (dir %v): %v", rel, dir, err)
		}
	}
}
