package proof

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/host/shellenv"
)

// envCandidates are variables that make the shell, the C library or a
// profiled tool open a file or run code named by their value: startup
// files, locale and message catalogues, time zones, the loader, tracing.
// TestHostEnvExecution gives each to allowed commands with values naming
// a directory the agent could write; every one a request may set must
// leave that directory untouched.
var envCandidates = []string{
	"LOCPATH", "NLSPATH", "TZDIR", "TZ", "LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LC_CTYPE", "LC_TIME",
	"GCONV_PATH", "SSH_CLIENT", "SSH2_CLIENT", "BASH_ENV", "ENV", "HOSTALIASES", "TERMINFO", "TERMINFO_DIRS",
	"INPUTRC", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "MALLOC_TRACE", "GLIBC_TUNABLES", "SHELLOPTS",
	"BASHOPTS", "PS4", "HISTFILE", "XDG_CONFIG_HOME", "JQ_COLORS", "GREP_OPTIONS", "GREP_COLORS", "CDPATH",
	"BASH_LOADABLES_PATH", "EXECIGNORE", "GLOBIGNORE", "BASH_XTRACEFD", "HOME", "ZDOTDIR", "PROMPT_COMMAND",
	"OUTPUT_CHARSET", "CHARSETALIASDIR", "TEXTDOMAINDIR", "TEXTDOMAIN", "MALLOC_CHECK_", "RES_OPTIONS", "LOCALDOMAIN",
	"TERMCAP", "POSIX_ME_HARDER", "GETCONF_DIR", "LINGUAS", "TMPDIR", "QUOTING_STYLE", "BLOCK_SIZE", "TIME_STYLE",
	"JQ_LIBRARY_PATH", "GREP_COLOR", "MAIL", "MAILPATH", "HOSTFILE", "BASH_COMPAT", "BASH_ARGV0", "PS0", "PS1",
	"KSH_ENV", "FPATH", "SHELL", "SHLVL", "TERM", "PWD", "OLDPWD", "CDPATH", "BASH_ENV", "ENV",
}

// envCommands are allowed commands (as their pinned text) that start the
// shell and the tools the way conch does; `head -n x` prints a translated
// error message, so it loads the message catalogue.
var envCommands = []string{
	`'/usr/bin/head' '-n' 'x'`,
	`'/usr/bin/bash' '-c' ''\''/usr/bin/wc'\'' '\''-l'\'''`,
	`'/usr/bin/jq' '-n' 'now|todate'`,
}

// TestHostEnvExecution is the environment half of the execution proof.
func TestHostEnvExecution(t *testing.T) {
	h := newExecHarness(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	// planted is what an agent could have written: startup files of a
	// home, a locale, a message catalogue, a time zone file.
	planted := filepath.Join(h.dir, "planted")
	for _, p := range []string{".bashrc", ".bash_profile", ".profile", ".zshenv", ".jq", "f", "xx/LC_CTYPE",
		"LC_MESSAGES/coreutils.mo", "xx/LC_MESSAGES/coreutils.mo", "UTC", "x/f"} {
		full := filepath.Join(planted, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("touch "+filepath.Join(planted, "RAN")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	up := strings.Repeat("../", 12) + strings.TrimPrefix(planted, "/")
	values := []string{planted, planted + "/f", ":" + planted + "/f", up, up + "/xx", "fr:" + up, "xx", "1", "127.0.0.1 1 2"}
	ran := 0
	for _, k := range envCandidates {
		for _, v := range values {
			if shellenv.Validate(map[string]string{k: v}) != "" {
				continue // a request cannot set it
			}
			env := []string{k + "=" + v}
			if k == "LANGUAGE" || k == "LOCPATH" {
				env = append(env, "LC_ALL=xx") // a locale the catalogue or LOCPATH is looked up for
			}
			for _, cmd := range envCommands {
				if strings.Contains(cmd, "jq") {
					if _, err := os.Stat("/usr/bin/jq"); err != nil {
						continue
					}
				}
				ran++
				if bad := h.runEnv(bash, cmd, planted, env); len(bad) > 0 {
					t.Errorf("%s %s: the command touched what the agent named:\n\t%s", strings.Join(env, " "), cmd, strings.Join(bad, "\n\t"))
				}
			}
		}
	}
	t.Logf("%d runs with a variable a request may set", ran)
}

// runEnv runs pinned under `bash -c` and strace with the variables env (as
// the engine would: HOME the planted home, SHLVL unset) and returns every
// access under planted.
func (h *execHarness) runEnv(bash, pinned, planted string, env []string) []string {
	dir, err := os.MkdirTemp(h.dir, "env")
	if err != nil {
		return []string{err.Error()}
	}
	defer os.RemoveAll(dir)
	log := filepath.Join(dir, ".strace")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.strace, "-f", "-qq", "-e", "trace=%file,%process", "-o", log, "--", bash, "-c", pinned)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + planted, "LANG=C.UTF-8"}, env...)
	cmd.WaitDelay = 5 * time.Second
	_ = cmd.Run()
	var bad []string
	if _, err := os.Stat(filepath.Join(planted, "RAN")); err == nil {
		bad = append(bad, "ran a planted file")
		os.Remove(filepath.Join(planted, "RAN"))
	}
	f, err := os.Open(log)
	if err != nil {
		return append(bad, "no strace log: "+err.Error())
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := straceLine.FindStringSubmatch(sc.Text())
		if m == nil || !straceWatched[m[1]] {
			continue
		}
		if s := straceStr.FindStringSubmatch(m[2]); s != nil {
			p := s[1]
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			// ~/.jq is the home's (the operator's), read by every jq: allowed, as in
			// the safe-bin proof.
			if p = filepath.Clean(p); (p == planted || strings.HasPrefix(p, planted+"/")) && p != filepath.Join(planted, ".jq") {
				bad = append(bad, sc.Text())
			}
		}
	}
	return bad
}
