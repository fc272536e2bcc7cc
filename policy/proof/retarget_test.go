package proof

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/policy"
)

// TestRetargetedSymlinkRunsTheAllowedFile checks the pinned command of a
// segment allowed by the realpath rule (a literal pattern naming the same
// file as the command word) and of `sh SCRIPT` allowed by the script's
// realpath: the agent's word is a symlink in a directory it can write,
// pointing at the allowlisted file while the gate judges it, and pointing
// elsewhere when the pinned command runs. What runs must be the file the
// gate allowed. The command words are generated: the symlink named by a
// relative path, an absolute path, through PATH, and under every
// dispatch wrapper and `bash -c`.
func TestRetargetedSymlinkRunsTheAllowedFile(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(root, "RAN")
	write := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(root+"/bin/allowed", "#!/bin/sh\necho ALLOWED\n")
	write(root+"/scripts/job.sh", "echo ALLOWED\n")
	write(root+"/evil/tool", "#!/bin/sh\ntouch '"+ran+"'\n")
	write(root+"/evil/job.sh", "touch '"+ran+"'\n")
	work := root + "/work"
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	env := policy.Env{PATH: work + ":/usr/bin:/bin", Cwd: work, Home: root}
	allow := []policy.AllowEntry{{Pattern: root + "/bin/allowed"}, {Pattern: root + "/scripts/job.sh"}}
	// Wrappers outside the trusted directories are transparent only when
	// allowlisted: here by realpath, through symlinks in the workdir.
	wrappers := map[string]string{}
	for _, w := range []string{"nice", "timeout", "stdbuf", "bash", "sh", "xargs", "nohup"} {
		p, err := exec.LookPath(w)
		if err != nil {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		wrappers["w"+w] = real
		allow = append(allow, policy.AllowEntry{Pattern: real})
	}

	words := []string{"./x", "x", work + "/x", "../work/x"}
	var cmds []string
	for _, w := range words {
		cmds = append(cmds, w, "env "+w, "nice -n 1 "+w, "timeout 50 "+w, "stdbuf -oL "+w, "nohup "+w,
			"xargs "+w, "bash -c '"+w+"'", "bash -c 'env "+w+"'", "xargs -n 1 "+w)
	}
	for _, s := range []string{"./s.sh", work + "/s.sh", "s.sh"} {
		cmds = append(cmds, "sh "+s, "bash "+s, "bash -c 'sh "+s+"'", "env bash "+s)
	}
	allowed := root + "/bin/allowed"
	cmds = append(cmds, "./wnice -n 1 "+allowed, "./wtimeout 50 "+allowed, "./wstdbuf -oL "+allowed, "./wnohup "+allowed,
		"./wxargs "+allowed, "./wbash -c "+allowed, "./wsh -c "+allowed, "wbash -c "+allowed, "./wbash s.sh",
		"./wsh ./s.sh", "nice ./wnice "+allowed, "./wbash -c './wnice "+allowed+"'")
	for _, cmd := range cmds {
		link := func(dir string) {
			t.Helper()
			for name, target := range map[string]string{"x": dir + "/tool", "s.sh": dir + "/job.sh"} {
				if dir == root+"/bin" && name == "x" {
					target = dir + "/allowed"
				}
				if dir == root+"/bin" && name == "s.sh" {
					target = root + "/scripts/job.sh"
				}
				os.Remove(filepath.Join(work, name))
				if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
					t.Fatal(err)
				}
			}
			for name, real := range wrappers {
				target := real
				if dir != root+"/bin" {
					target = dir + "/tool"
				}
				os.Remove(filepath.Join(work, name))
				if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
					t.Fatal(err)
				}
			}
		}
		link(root + "/bin")
		d := policy.Evaluate(policy.Request{Command: cmd, Security: policy.SecurityAllowlist, Ask: policy.AskOff,
			Allowlist: allow, SafeBins: []string{}, Env: env})
		if d.Outcome != policy.OutcomeRun {
			// a form the gate refuses cannot be retargeted
			t.Logf("%q: %s %s", cmd, d.Outcome, d.Reason)
			continue
		}
		link(root + "/evil")
		c := exec.Command(bash, "-c", d.Pinned)
		c.Dir, c.Env = work, []string{"PATH=" + env.PATH}
		out, _ := c.CombinedOutput()
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("%q: pinned %s ran the retargeted symlink's file (output %q)", cmd, d.Pinned, out)
			os.Remove(ran)
		} else if !strings.Contains(string(out), "ALLOWED") {
			t.Errorf("%q: pinned %s did not run the allowed file (output %q)", cmd, d.Pinned, out)
		}
	}
}
