package proof

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/conchsh/conch/internal/host/shellenv"
)

// harmlessInterpreterEnv are the variables the interpreters document that
// a request may set: none names a file, a directory, a module or a
// command, or makes the interpreter read a program from its input.
var harmlessInterpreterEnv = map[string]bool{
	// python3 --help-env
	"PYTHONCASEOK": true, "PYTHONCOERCECLOCALE": true, "PYTHONDEBUG": true, "PYTHONDEVMODE": true,
	"PYTHONDONTWRITEBYTECODE": true, "PYTHONFAULTHANDLER": true, "PYTHONHASHSEED": true,
	"PYTHONINTMAXSTRDIGITS": true, "PYTHONIOENCODING": true, "PYTHONMALLOC": true, "PYTHONNODEBUGRANGES": true,
	"PYTHONNOUSERSITE": true, "PYTHONOPTIMIZE": true, "PYTHONSAFEPATH": true, "PYTHONUNBUFFERED": true,
	"PYTHONUTF8": true, "PYTHONVERBOSE": true, "PYTHONWARNDEFAULTENCODING": true, "PYTHONMALLOCSTATS": true,
	"PYTHONLEGACYWINDOWSFSENCODING": true, "PYTHONLEGACYWINDOWSSTDIO": true, "PYTHONTRACEMALLOC": true,
	"PYTHONPROFILEIMPORTTIME": true, "PYTHONASYNCIODEBUG": true,
	"PYTHON_CPU_COUNT": true, "PYTHON_FROZEN_MODULES": true, "PYTHON_COLORS": true, "PYTHON_BASIC_REPL": true,
	"PYTHON_GIL": true, "PYTHON_PERF_JIT_SUPPORT": true, "PYTHONPERFSUPPORT": true, "PYTHON_JIT": true,
	"PYTHONDUMPREFS": true, "PYTHONSTATS": true, "PYTHONTHREADDEBUG": true,
	// node --help
	"FORCE_COLOR": true, "NO_COLOR": true, "NODE_DEBUG": true, "NODE_DEBUG_NATIVE": true,
	"NODE_DISABLE_COLORS": true, "NODE_NO_WARNINGS": true, "NODE_PENDING_DEPRECATION": true,
	"NODE_PENDING_PIPE_INSTANCES": true, "NODE_PRESERVE_SYMLINKS": true, "NODE_SKIP_PLATFORM_CHECK": true,
	"NODE_TLS_REJECT_UNAUTHORIZED": true, "TZ": true, "UV_THREADPOOL_SIZE": true,
	// NODE_EXTRA_CA_CERTS reads a certificate file into the trust store; it
	// runs nothing and writes nothing.
	"NODE_EXTRA_CA_CERTS": true,
}

var envLine = regexp.MustCompile(`(?m)^\s{0,4}([A-Z][A-Z0-9_]{2,})\b`)

// TestInterpreterEnvJudged lists the environment variables each installed
// interpreter documents (`python3 --help-env`, the "Environment
// variables" section of `node --help`) and fails on any that a request may
// set without it being judged harmless here. An allowlisted `python3
// job.py` under strictInlineEval must not run code from the request's
// environment: PYTHONINSPECT makes it read a program from the terminal
// after the script, PYTHONUSERBASE runs the .pth files of a directory,
// PYTHONWARNINGS imports a module, NODE_REPL_EXTERNAL_MODULE loads one. A
// new release documenting a new variable fails this test until it is
// judged.
func TestInterpreterEnvJudged(t *testing.T) {
	help := map[string][]string{"python3": {"--help-env"}, "node": {"--help"}}
	found := 0
	for bin, args := range help {
		p, err := exec.LookPath(bin)
		if err != nil {
			t.Logf("%s is not installed", bin)
			continue
		}
		out, err := exec.Command(p, args...).Output()
		if err != nil {
			t.Logf("%s %s: %v", bin, args, err)
			continue
		}
		text := string(out)
		if bin == "node" {
			i := strings.Index(text, "Environment variables:")
			if i < 0 {
				t.Errorf("node --help has no environment section")
				continue
			}
			text = text[i:]
		}
		for _, m := range envLine.FindAllStringSubmatch(text, -1) {
			k := m[1]
			if (bin == "python3" && !strings.HasPrefix(k, "PYTHON")) || (bin == "node" && strings.HasPrefix(k, "Environment")) {
				continue
			}
			found++
			if !harmlessInterpreterEnv[k] && !shellenv.Blocked(k) {
				t.Errorf("%s documents %s, which a request may set and nobody judged harmless", bin, k)
			}
		}
	}
	// Variables an interpreter reads without documenting them in its help.
	for _, k := range []string{"PYTHONUSERBASE", "PYTHONEXECUTABLE", "PYTHON_HISTORY", "PERLLIB", "PERL5LIB", "PERL5OPT",
		"PERL5DB", "PERLIO_DEBUG", "RUBYLIB", "RUBYOPT", "RUBYPATH", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_CONFIG"} {
		if !shellenv.Blocked(k) {
			t.Errorf("a request may set %s", k)
		}
	}
	if found == 0 {
		t.Skip("no interpreter documents its environment here")
	}
	t.Logf("%d documented variables judged", found)
}

// TestInterpreterEnvVectors runs each vector the list closes, to show it
// is real here: the payload runs when the variable is given (directly, as
// an operator could), and a request may not give it.
func TestInterpreterEnvVectors(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "RAN")
	write := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(dir+"/job.py", "print('job')\n")
	write(dir+"/job.pl", "use Planted; print \"job\\n\";\n")
	write(dir+"/lib/Planted.pm", "package Planted; open(my $f, '>', '"+ran+"'); 1;\n")
	type vector struct {
		key, val string
		argv     []string
		input    string // typed at the terminal
	}
	var vs []vector
	if py, err := exec.LookPath("python3"); err == nil {
		out, _ := exec.Command(py, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')").Output()
		v := strings.TrimSpace(string(out))
		write(dir+"/ub/lib/python"+v+"/site-packages/x.pth", "import os; open('"+ran+"', 'w')\n")
		vs = append(vs,
			vector{"PYTHONINSPECT", "1", []string{py, dir + "/job.py"}, "open('" + ran + "', 'w').close(); exit()\n"},
			vector{"PYTHONUSERBASE", dir + "/ub", []string{py, dir + "/job.py"}, ""})
	}
	if perl, err := exec.LookPath("perl"); err == nil {
		vs = append(vs, vector{"PERLLIB", dir + "/lib", []string{perl, dir + "/job.pl"}, ""})
	}
	if zsh, err := exec.LookPath("zsh"); err == nil {
		// zsh reads PROMPT4 as PS4; with PROMPT_SUBST (an operator's
		// .zshenv, or sh emulation) xtrace expands it.
		vs = append(vs, vector{"PROMPT4", "$(touch " + ran + ")+ ", []string{zsh, "-f", "-o", "promptsubst", "-x", "-c", "true"}, ""})
	}
	if git, err := exec.LookPath("git"); err == nil {
		if exec.Command(git, "init", "-q", dir+"/repo").Run() == nil {
			vs = append(vs, vector{"GIT_EDITOR", "touch " + ran + "; false", []string{git, "-C", dir + "/repo", "commit", "--allow-empty"}, ""})
		}
	}
	for _, v := range vs {
		if msg := shellenv.Validate(map[string]string{v.key: v.val}); !strings.Contains(msg, "'"+v.key+"' is forbidden") {
			t.Errorf("a request may set %s: %q", v.key, msg)
		}
		os.Remove(ran)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		c := exec.CommandContext(ctx, v.argv[0], v.argv[1:]...)
		c.Env = append(os.Environ(), v.key+"="+v.val, "HOME="+dir, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b")
		c.Dir = dir
		f, err := pty.Start(c)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if v.input != "" {
			f.Write([]byte(v.input))
		}
		go func() {
			b := make([]byte, 4096)
			for {
				if _, err := f.Read(b); err != nil {
					return
				}
			}
		}()
		c.Wait()
		f.Close()
		cancel()
		if _, err := os.Stat(ran); err != nil {
			t.Logf("%s: the payload did not run here (%v)", v.key, err)
		} else {
			t.Logf("%s: the payload ran (a request may not set it)", v.key)
		}
	}
}

// TestSortTmpdirVector: sort (a safe bin once listed in safeBins) writes
// its input in temporary files under $TMPDIR when the input outgrows its
// buffer: an agent feeding it through stdin chose the directory, and the
// files (its own content) stay when sort is killed. A request may not set
// TMPDIR (nor TMP, TEMP, TEMPDIR); the vector is run to show it is real.
func TestSortTmpdirVector(t *testing.T) {
	sortPath, err := exec.LookPath("sort")
	if err != nil {
		t.Skip("sort is not installed")
	}
	for _, k := range []string{"TMPDIR", "TMP", "TEMP", "TEMPDIR"} {
		if msg := shellenv.Validate(map[string]string{k: "x"}); !strings.Contains(msg, "'"+k+"' is forbidden") {
			t.Errorf("a request may set %s: %q", k, msg)
		}
	}
	dir := t.TempDir()
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, past, past); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, sortPath, "-S", "1M") // a small buffer stands in for a large input
	c.Env = []string{"TMPDIR=" + dir, "LC_ALL=C"}
	c.Stdin = strings.NewReader(strings.Repeat("line of the agent's choosing\n", 200000))
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("sort: %v %s", err, out)
	}
	// sort removes its files when it ends normally; that it wrote them
	// is what matters, so look at the directory's modification time.
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.ModTime().Equal(before.ModTime()) {
		t.Logf("sort wrote nothing under TMPDIR here")
	} else {
		t.Logf("sort wrote its temporary files under the TMPDIR it was given")
	}
}
