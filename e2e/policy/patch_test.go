package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/store/ledger"
	"github.com/conchsh/conch/internal/testkit/e2etest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const patchOn = `{"tools":{"exec":{"applyPatch":{"enabled":true}}}}`

// patchWorkspace returns a workspace with two files and, next to it, a
// directory outside it that the workspace links to (ws/out -> outside).
func patchWorkspace(t *testing.T) (ws, outside string) {
	t.Helper()
	base := t.TempDir()
	ws, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{ws, outside} {
		os.MkdirAll(d, 0o755)
	}
	writeFile(t, filepath.Join(ws, "main.go"), "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n")
	writeFile(t, filepath.Join(ws, "old.txt"), "old\n")
	writeFile(t, filepath.Join(outside, "secret.txt"), "secret\n")
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	return ws, outside
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

const goodPatch = `*** Begin Patch
*** Update File: main.go
@@ func main() {
-	println("hi")
+	println("hello")
*** Add File: docs/new.md
+# New
*** Delete File: old.txt
*** End Patch`

const goodText = "Success. Updated the following files:\nM main.go\nA docs/new.md\nD old.txt"

// escapePatch changes a file inside and writes through the symlink out:
// the whole patch must fail and change nothing.
const escapePatch = `*** Begin Patch
*** Update File: main.go
-	println("hi")
+	println("pwned")
*** Update File: out/secret.txt
-secret
+pwned
*** End Patch`

func checkApplied(t *testing.T, ws string) {
	t.Helper()
	if got := readFile(t, filepath.Join(ws, "main.go")); !strings.Contains(got, `println("hello")`) {
		t.Errorf("main.go = %q", got)
	}
	if got := readFile(t, filepath.Join(ws, "docs", "new.md")); got != "# New\n" {
		t.Errorf("docs/new.md = %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "old.txt")); !os.IsNotExist(err) {
		t.Errorf("old.txt still there: %v", err)
	}
}

func checkUntouched(t *testing.T, ws, outside string) {
	t.Helper()
	if got := readFile(t, filepath.Join(ws, "main.go")); !strings.Contains(got, `println("hi")`) {
		t.Errorf("main.go changed: %q", got)
	}
	if got := readFile(t, filepath.Join(outside, "secret.txt")); got != "secret\n" {
		t.Errorf("outside file changed: %q", got)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Errorf("outside has %d entries", len(ents))
	}
	filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".conch-") {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

// ledgerHasPatch waits for a patch record with the sha256 of input.
func ledgerHasPatch(t *testing.T, home, input, host string) {
	t.Helper()
	sum := sha256.Sum256([]byte(input))
	want := hex.EncodeToString(sum[:])
	e2etest.Eventually(t, 5*time.Second, func() string {
		recs, err := ledger.Tail(home, 100, ledger.Filter{})
		if err != nil {
			return err.Error()
		}
		for _, r := range recs {
			if r.Type != ledger.TypePatch {
				continue
			}
			b, _ := json.Marshal(r.Fields)
			var f ledger.Patch
			json.Unmarshal(b, &f)
			if f.PatchSHA256 == want && f.Host == host && len(f.Files) > 0 {
				return ""
			}
		}
		return "no patch record with sha256 " + want + " in the ledger"
	})
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func hasName(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestApplyPatchMCPStdio applies a patch over `conch mcp` stdio in the
// --workdir workspace, checks the result shape, a failure, a symlink
// escape that changes nothing, and the ledger record.
func TestApplyPatchMCPStdio(t *testing.T) {
	t.Parallel()
	ws, outside := patchWorkspace(t)
	home := e2etest.NewHome(t, patchOn)
	c := e2etest.StartConch(t, home, "--workdir", ws)
	if names := toolNames(t, c.CS); !hasName(names, "apply_patch") {
		t.Fatalf("apply_patch not listed: %v", names)
	}

	// A failure first: nothing changes.
	r := c.Call("apply_patch", map[string]any{"input": escapePatch})
	if !r.IsError || r.Text != "Path escapes workspace: out/secret.txt" || r.Str("status") != "failed" {
		t.Fatalf("escape: %q %v", r.Text, r.D)
	}
	if e, _ := r.D["error"].(map[string]any); e["code"] != "path_outside_workspace" {
		t.Fatalf("escape code: %v", r.D)
	}
	checkUntouched(t, ws, outside)

	r = c.Call("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Update File: main.go\n-nope\n+x\n*** End Patch"})
	if !r.IsError || r.Text != "Failed to find expected lines in main.go:\nnope" {
		t.Fatalf("context: %q %v", r.Text, r.D)
	}
	r = c.Call("apply_patch", map[string]any{"input": " "})
	if !r.IsError || r.Text != "Provide a patch input." {
		t.Fatalf("empty: %q", r.Text)
	}

	r = c.Call("apply_patch", map[string]any{"input": goodPatch})
	if r.IsError || r.Text != goodText || r.Str("status") != "completed" {
		t.Fatalf("apply: %q %v", r.Text, r.D)
	}
	sum, _ := json.Marshal(r.D["summary"])
	if string(sum) != `{"added":["docs/new.md"],"deleted":["old.txt"],"modified":["main.go"]}` {
		t.Errorf("summary %s", sum)
	}
	checkApplied(t, ws)
	c.Close()
	ledgerHasPatch(t, home, goodPatch, "gateway")
}

// TestApplyPatchHidden: the tool is not listed unless enabled, nor when
// exec or apply_patch is denied, and a call is refused.
func TestApplyPatchHidden(t *testing.T) {
	t.Parallel()
	for _, cfg := range []string{
		``,
		`{"tools":{"deny":["exec"],"exec":{"applyPatch":{"enabled":true}}}}`,
		`{"tools":{"deny":["apply_patch"],"exec":{"applyPatch":{"enabled":true}}}}`,
		`{"tools":{"exec":{"applyPatch":{"enabled":true}}},"agents":{"main":{"tools":{"exec":{"applyPatch":{"enabled":false}}}}}}`,
	} {
		ws, _ := patchWorkspace(t)
		c := e2etest.StartConch(t, e2etest.NewHome(t, cfg), "--workdir", ws)
		if names := toolNames(t, c.CS); hasName(names, "apply_patch") {
			t.Errorf("config %s: apply_patch listed", cfg)
		}
		c.Close()
	}
}

// TestApplyPatchHTTP applies patches with POST /v1/apply_patch in the
// agent's configured workspace.
func TestApplyPatchHTTP(t *testing.T) {
	t.Parallel()
	ws, outside := patchWorkspace(t)
	home := e2etest.NewHome(t, `{"tools":{"exec":{"applyPatch":{"enabled":true}}},"agents":{"main":{"workspace":"`+ws+`"}}}`)
	g := e2etest.StartGateway(t, home)
	defer g.Stop()

	code, body := g.Do("POST", "/v1/apply_patch", g.Token, map[string]any{"input": escapePatch}, nil)
	if code != 403 || body["text"] != "Path escapes workspace: out/secret.txt" {
		t.Fatalf("escape: %d %v", code, body)
	}
	checkUntouched(t, ws, outside)
	code, body = g.Do("POST", "/v1/apply_patch", g.Token, map[string]any{"input": "*** Begin Patch\n*** Frob\n*** End Patch"}, nil)
	if e, _ := body["error"].(map[string]any); code != 422 || e["code"] != "invalid_patch" {
		t.Fatalf("invalid: %d %v", code, body)
	}
	code, body = g.Do("POST", "/v1/apply_patch", g.Token, map[string]any{"input": goodPatch, "extra": 1}, nil)
	if code != 400 {
		t.Fatalf("unknown field: %d %v", code, body)
	}
	code, body = g.Do("POST", "/v1/apply_patch", g.Token, map[string]any{"input": goodPatch}, nil)
	if d, _ := body["details"].(map[string]any); code != 200 || body["text"] != goodText || d["status"] != "completed" {
		t.Fatalf("apply: %d %v", code, body)
	}
	checkApplied(t, ws)
	ledgerHasPatch(t, home, goodPatch, "gateway")

	// A patch above the 4 MiB body limit of the other routes fits.
	line := "+" + strings.Repeat("x", 99) + "\n"
	big := "*** Begin Patch\n*** Add File: big.txt\n" + strings.Repeat(line, 60_000) + "*** End Patch"
	if code, body = g.Do("POST", "/v1/apply_patch", g.Token, map[string]any{"input": big}, nil); code != 200 {
		t.Fatalf("6 MB patch: %d %v", code, body["text"])
	}
	if fi, err := os.Stat(filepath.Join(ws, "big.txt")); err != nil || fi.Size() != 60_000*100 {
		t.Fatalf("big.txt: %v", err)
	}

	// The CLI reaches the running gateway through the engine socket.
	writeFile(t, filepath.Join(ws, "old.txt"), "old\n")
	out, errOut, exit := runPatchCLI(t, "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch", "apply-patch", "--home", home)
	if exit != 0 || out != "Success. Updated the following files:\nD old.txt\n" {
		t.Fatalf("cli via socket: %d %q %q", exit, out, errOut)
	}
}

// runPatchCLI runs conch with stdin and a hard deadline.
func runPatchCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2etest.ConchBin, args...)
	cmd.Env = e2etest.CLIEnv("CONCH_HOME=" + filepath.Join(t.TempDir(), "default-home"))
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestApplyPatchCLI runs `conch apply-patch` with an in-process engine:
// the patch from stdin, the result on stdout, failures on stderr with
// their exit codes, and the ledger record.
func TestApplyPatchCLI(t *testing.T) {
	t.Parallel()
	ws, outside := patchWorkspace(t)
	home := e2etest.NewHome(t, patchOn)
	out, errOut, code := runPatchCLI(t, escapePatch, "apply-patch", "--home", home, "--workdir", ws)
	if code != e2etest.ExitForbidden || out != "" || errOut != "Path escapes workspace: out/secret.txt\n" {
		t.Fatalf("escape: %d %q %q", code, out, errOut)
	}
	checkUntouched(t, ws, outside)
	out, errOut, code = runPatchCLI(t, "*** Begin Patch\n*** Update File: main.go\n@@ func nope()\n-x\n+y\n*** End Patch", "apply-patch", "--home", home, "--workdir", ws)
	if code != e2etest.ExitFailed || errOut != "Failed to find context 'func nope()' in main.go\n" {
		t.Fatalf("context: %d %q %q", code, out, errOut)
	}
	// The lenient heredoc wrapper, as a shell user would paste it.
	out, errOut, code = runPatchCLI(t, "<<'EOF'\n"+goodPatch+"\nEOF\n", "apply-patch", "--home", home, "--workdir", ws)
	if code != 0 || out != goodText+"\n" {
		t.Fatalf("apply: %d %q %q", code, out, errOut)
	}
	checkApplied(t, ws)
	ledgerHasPatch(t, home, "<<'EOF'\n"+goodPatch+"\nEOF\n", "gateway")

	// Not enabled: refused with exit 4.
	_, errOut, code = runPatchCLI(t, goodPatch, "apply-patch", "--home", e2etest.NewHome(t, ""), "--workdir", ws)
	if code != e2etest.ExitForbidden || !strings.Contains(errOut, "tools.exec.applyPatch.enabled") {
		t.Fatalf("disabled: %d %q", code, errOut)
	}
}
