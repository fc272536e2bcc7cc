package admin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func findings(home string) map[string][]Finding {
	out := map[string][]Finding{}
	for _, f := range Doctor(home) {
		out[f.ID] = append(out[f.ID], f)
	}
	return out
}

// TestDoctorRootUnsandboxed: the warning comes exactly for a root gateway on which an
// agent's commands run ungated, for every combination of who runs the gateway, the
// sandbox mode and the agent's host and policy.
func TestDoctorRootUnsandboxed(t *testing.T) {
	defer func(f func() int) { doctorEUID = f }(doctorEUID)
	for _, root := range []bool{false, true} {
		for _, tc := range []struct {
			exec    string
			sandbox string
			warn    bool
		}{
			{``, ``, true}, // the built-in default: implicit host, sandboxing off
			{`"host":"gateway","security":"full","ask":"off"`, ``, true},
			{`"host":"gateway","security":"allowlist","ask":"on-miss"`, ``, false},
			{`"host":"gateway","security":"full","ask":"always"`, ``, false},
			{`"host":"node"`, ``, false},
			{``, `"sandbox":{"mode":"all"},`, false},
		} {
			home := filepath.Join(t.TempDir(), "home")
			os.Mkdir(home, 0o700)
			os.WriteFile(filepath.Join(home, "config.json"), []byte(`{`+tc.sandbox+`"tools":{"exec":{`+tc.exec+`}}}`), 0o600)
			doctorEUID = func() int { return 0 }
			if !root {
				doctorEUID = func() int { return 1000 }
				// The home of an unprivileged gateway belongs to it.
				if err := os.Chown(home, 65534, 65534); err != nil && os.Geteuid() == 0 {
					t.Fatal(err)
				}
			}
			got := findings(home)["gateway.root_unsandboxed"]
			if want := root && tc.warn; (len(got) > 0) != want {
				t.Errorf("root %v, exec {%s}, %s: gateway.root_unsandboxed %v, want %v", root, tc.exec, tc.sandbox, got, want)
			}
			for _, f := range got {
				if f.Level != "warn" || !strings.Contains(f.Message, "agent main") {
					t.Errorf("finding %+v", f)
				}
			}
		}
	}
}

// TestDoctorLooseModes: every directory and file of the home that group or others can
// reach is a warning (secrets stay an error), and --fix tightens all of them.
func TestDoctorLooseModes(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	for _, d := range []string{"sessions/s1", "run/s", "ledger", "nodes", "state"} {
		os.MkdirAll(filepath.Join(home, d), 0o700)
	}
	files := map[string]os.FileMode{
		"sessions/s1/meta.json":      0o644,
		"sessions/s1/journal-001":    0o640,
		"state/exec-defaults.json":   0o604,
		"ledger/ledger-000001.jsonl": 0o644,
		"ledger.key":                 0o644,
		"nodes/paired.json":          0o660,
		"operator.token":             0o600,
	}
	for f, m := range files {
		os.WriteFile(filepath.Join(home, f), nil, 0o600)
		os.Chmod(filepath.Join(home, f), m)
	}
	for _, d := range []string{"sessions", "sessions/s1", "run/s", "ledger"} {
		os.Chmod(filepath.Join(home, d), 0o755)
	}
	got := findings(home)
	msgs := func(id string) string {
		var b strings.Builder
		for _, f := range got[id] {
			b.WriteString(f.Level + " " + f.Message + "\n")
		}
		return b.String()
	}
	for _, f := range []string{"ledger/ledger-000001.jsonl", "ledger.key", "nodes/paired.json"} {
		if !strings.Contains(msgs("home.permissions"), "error "+filepath.Join(home, f)+" has mode") {
			t.Errorf("secret %s not an error:\n%s", f, msgs("home.permissions"))
		}
	}
	for _, p := range []string{"file " + home + "/sessions/s1/meta.json has mode 0644, want 0600", "file " + home + "/sessions/s1/journal-001 has mode 0640, want 0600",
		"file " + home + "/state/exec-defaults.json has mode 0604, want 0600", "directory " + home + "/sessions has mode 0755, want 0700",
		"directory " + home + "/run/s has mode 0755", "directory " + home + "/ledger has mode 0755"} {
		if !strings.Contains(msgs("home.modes"), "warn "+p) {
			t.Errorf("home.modes lacks %q:\n%s", p, msgs("home.modes"))
		}
	}
	if strings.Contains(msgs("home.modes"), "operator.token") || strings.Contains(msgs("home.modes"), "ledger.key") {
		t.Errorf("home.modes repeats a secret or a tight file:\n%s", msgs("home.modes"))
	}
	if _, err := DoctorFix(home); err != nil {
		t.Fatal(err)
	}
	got = findings(home)
	if len(got["home.modes"]) != 0 || len(got["home.permissions"]) != 0 {
		t.Fatalf("after --fix:\n%s%s", msgs("home.modes"), msgs("home.permissions"))
	}
}

// TestDoctorModesSandboxTrees: what an agent writes in its sandbox's home, tmp and
// private workspace (a build's 0644 files, a cache's 0755 directories) is the agent's,
// inside directories only the owner can enter: no home.modes warning, and --fix leaves
// the modes alone. The directories themselves are still checked.
func TestDoctorModesSandboxTrees(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	var agentFiles []string
	for _, tree := range []string{"home", "tmp", "workspace"} {
		root := filepath.Join(home, "sandboxes", "main", tree)
		os.MkdirAll(filepath.Join(root, ".cache", "pip"), 0o755)
		os.Chmod(filepath.Join(root, ".cache"), 0o755)
		for _, f := range []string{"build.sh", ".cache/pip/wheel"} {
			p := filepath.Join(root, f)
			os.WriteFile(p, []byte("x"), 0o600)
			os.Chmod(p, 0o755)
			agentFiles = append(agentFiles, p)
		}
		agentFiles = append(agentFiles, filepath.Join(root, ".cache"), filepath.Join(root, ".cache", "pip"))
		os.Chmod(root, 0o700)
	}
	os.Chmod(filepath.Join(home, "sandboxes", "main", "tmp"), 0o755) // the tree itself, loosened
	os.Chmod(home, 0o700)
	var msgs []string
	for _, f := range findings(home)["home.modes"] {
		msgs = append(msgs, f.Message)
	}
	all := strings.Join(msgs, "\n")
	if !strings.Contains(all, filepath.Join(home, "sandboxes", "main", "tmp")+" has mode 0755") {
		t.Errorf("a loosened sandbox tmp is not reported:\n%s", all)
	}
	if strings.Contains(all, ".cache") || strings.Contains(all, "build.sh") {
		t.Errorf("the agent's own files are reported:\n%s", all)
	}
	if _, err := DoctorFix(home); err != nil {
		t.Fatal(err)
	}
	for _, p := range agentFiles {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("--fix changed %s: %v %v", p, fi.Mode(), err)
		}
	}
}

// TestPatchDoctor: doctor reports apply_patch settings that write outside
// the workspace or name models conch cannot see.
func TestPatchDoctor(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"tools":{"exec":{"applyPatch":{"enabled":true,"workspaceOnly":false,"allowModels":["gpt-5"]}}}}`), 0o600)
	got := map[string]string{}
	for _, f := range Doctor(home) {
		got[f.ID] = f.Level
	}
	if got["apply_patch.outside_workspace"] != "warn" || got["apply_patch.allow_models_ignored"] != "info" {
		t.Fatalf("findings: %v", got)
	}
}
