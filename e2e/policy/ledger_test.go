package policy

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/store/ledger"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// ledgerHome runs a few commands through conch mcp and returns the home, whose ledger
// then holds records.
func ledgerHome(t *testing.T, config string) string {
	t.Helper()
	home := e2etest.NewHome(t, config)
	c := e2etest.StartConch(t, home)
	for _, cmd := range []string{"echo one", "echo two", "echo three"} {
		if r := c.Exec(map[string]any{"command": cmd}); r.Str("status") != "completed" {
			t.Fatalf("%s: %q %v", cmd, r.Text, r.D)
		}
	}
	closeAndWait(t, c)
	return home
}

// closeAndWait closes conch mcp and waits until the process has exited, so that its
// last ledger writes are done.
func closeAndWait(t *testing.T, c *e2etest.Conch) {
	t.Helper()
	pid := c.Cmd.Process.Pid
	c.Close()
	e2etest.Eventually(t, 30*time.Second, func() string {
		if !e2etest.IsZombie(pid) {
			return fmt.Sprintf("conch mcp (pid %d) still runs after close", pid)
		}
		return ""
	})
}

// cloneLedger copies a home's ledger and key to a new home.
func cloneLedger(t *testing.T, home string) string {
	t.Helper()
	dst := e2etest.NewHome(t, "")
	if out, err := exec.Command("cp", "-a", filepath.Join(home, "ledger"), filepath.Join(home, ledger.KeyFile), dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return dst
}

// cutTail removes the last k records of a one-file ledger and rewrites HEAD to match,
// as anyone who can write the home can: HEAD is the JSON of the new last record.
func cutTail(t *testing.T, home string, k int, sign ed25519.PrivateKey) {
	t.Helper()
	path := filepath.Join(home, "ledger", "ledger-000001.jsonl")
	data, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(data), "\n")
	lines = lines[:len(lines)-1] // the empty string after the last newline
	if k >= len(lines) {
		t.Fatalf("cut %d of %d records", k, len(lines))
	}
	kept := strings.Join(lines[:len(lines)-k], "")
	os.WriteFile(path, []byte(kept), 0o600)
	var last struct {
		Seq  int64  `json:"seq"`
		Hash string `json:"hash"`
	}
	json.Unmarshal([]byte(lines[len(lines)-k-1]), &last)
	head := map[string]any{"seq": last.Seq, "hash": last.Hash, "file": "ledger-000001.jsonl", "size": len(kept)}
	if sign != nil {
		ck := ledger.Checkpoint{Seq: last.Seq, Hash: last.Hash, TS: time.UnixMilli(0)}
		head["ts"] = int64(0)
		head["sig"] = base64.RawURLEncoding.EncodeToString(ed25519.Sign(sign, ck.Message()))
	}
	b, _ := json.Marshal(head)
	os.WriteFile(filepath.Join(home, "ledger", "HEAD"), append(b, '\n'), 0o600)
}

// TestLedgerTruncationCLI: cutting records off the end of the ledger and rewriting HEAD
// to match passes `conch ledger verify` no more, for every number of records cut;
// replacing the home's key too is caught by the public key saved before, and by a
// checkpoint copied from an earlier verify.
func TestLedgerTruncationCLI(t *testing.T) {
	home := ledgerHome(t, "")
	pubOut, code := e2etest.CLI(t, "ledger", "key", "--home", home)
	if code != 0 || !strings.HasPrefix(pubOut, "ed25519:") {
		t.Fatalf("ledger key: %d %q", code, pubOut)
	}
	pubFile := filepath.Join(t.TempDir(), "ledger.pub")
	os.WriteFile(pubFile, []byte(pubOut), 0o600)
	if again, _ := e2etest.CLI(t, "ledger", "key", "--home", home); again != pubOut {
		t.Fatalf("a second ledger key printed %q, then %q", pubOut, again)
	}
	out, code := e2etest.CLI(t, "ledger", "verify", "--home", home, "--pubkey", strings.TrimSpace(pubOut))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || !strings.HasPrefix(lines[0], "ok: ") || len(lines) < 2 || !strings.HasPrefix(lines[1], "checkpoint ") || !strings.HasSuffix(lines[1], "(signed by the given key)") {
		t.Fatalf("verify of the intact ledger: %d\n%s", code, out)
	}
	checkpoint := strings.Fields(lines[1])[1]
	recs, _ := ledger.Tail(home, 0, ledger.Filter{})
	if len(recs) < 4 {
		t.Fatalf("the ledger holds %d records", len(recs))
	}

	_, attacker, _ := ed25519.GenerateKey(rand.Reader)
	for k := 1; k < len(recs); k++ {
		// Without the key: HEAD unsigned, as conch wrote it before it signed.
		h := cloneLedger(t, home)
		cutTail(t, h, k, nil)
		if out, code := e2etest.CLI(t, "ledger", "verify", "--home", h); code != 1 || !strings.Contains(out, "HEAD is not signed") {
			t.Fatalf("cut %d, HEAD rewritten: verify %d\n%s", k, code, out)
		}
		// With a key of the attacker's own in place of the home's.
		h = cloneLedger(t, home)
		cutTail(t, h, k, attacker)
		der, _ := x509.MarshalPKCS8PrivateKey(attacker)
		os.WriteFile(filepath.Join(h, ledger.KeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
		if out, code := e2etest.CLI(t, "ledger", "verify", "--home", h); code != 0 {
			t.Fatalf("cut %d, re-signed with a new home key: plain verify cannot tell, but said %d\n%s", k, code, out)
		}
		if out, code := e2etest.CLI(t, "ledger", "verify", "--home", h, "--pubkey", pubFile); code != 1 || !strings.Contains(out, "does not verify with the given public key") {
			t.Fatalf("cut %d, re-signed: verify --pubkey %d\n%s", k, code, out)
		}
		// The checkpoint's record is gone; and its signature does not verify with
		// the replaced home key.
		unsigned := strings.Join(strings.Split(checkpoint, ":")[:2], ":")
		if out, code := e2etest.CLI(t, "ledger", "verify", "--home", h, "--checkpoint", unsigned); code != 1 || !strings.Contains(out, "truncated: a given checkpoint names seq") {
			t.Fatalf("cut %d, re-signed: verify --checkpoint %s: %d\n%s", k, unsigned, code, out)
		}
		if out, code := e2etest.CLI(t, "ledger", "verify", "--home", h, "--checkpoint", checkpoint); code != 1 || !strings.Contains(out, "signature does not verify") {
			t.Fatalf("cut %d, re-signed: verify --checkpoint %s: %d\n%s", k, checkpoint, code, out)
		}
		if out, code := e2etest.CLI(t, "ledger", "verify", "--home", h, "--pubkey", pubFile, "--checkpoint", checkpoint); code != 1 {
			t.Fatalf("cut %d, re-signed: verify --pubkey --checkpoint: %d\n%s", k, code, out)
		}
	}
	for _, bad := range [][]string{{"--pubkey", "ed25519:xx"}, {"--pubkey", filepath.Join(t.TempDir(), "missing")}, {"--checkpoint", "12"}} {
		if out, code := e2etest.CLI(t, append([]string{"ledger", "verify", "--home", home}, bad...)...); code != 2 {
			t.Errorf("verify %v: %d %s", bad, code, out)
		}
	}
}

// TestLedgerGapFullDisk: commands run while the ledger's file system is full lose
// their records; verify says so (exit 1) from the note in HEAD, and after space
// returns the next run of conch writes the gap record.
func TestLedgerGapFullDisk(t *testing.T) {
	home := ledgerHome(t, "")
	dir := filepath.Join(home, "ledger")
	saved := t.TempDir()
	exec.Command("cp", "-a", dir+"/.", saved).Run()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=128k,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs for a full disk (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	exec.Command("cp", "-a", saved+"/.", dir).Run()
	filler := filepath.Join(dir, "filler")
	f, _ := os.Create(filler)
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	f.Close()

	c := e2etest.StartConch(t, home)
	for _, cmd := range []string{"echo lost-1", "echo lost-2"} {
		if r := c.Exec(map[string]any{"command": cmd}); r.Str("status") != "completed" {
			t.Fatalf("%s on a full ledger disk: %q %v", cmd, r.Text, r.D)
		}
	}
	closeAndWait(t, c) // drains the ledger queue: every write fails, HEAD notes the loss
	// The process may still be draining as close returns.
	e2etest.Eventually(t, 30*time.Second, func() string {
		out, code := e2etest.CLI(t, "ledger", "verify", "--home", home)
		if code != 1 || !strings.HasPrefix(out, "gaps: ") || !strings.Contains(out, "no space left on device") {
			return fmt.Sprintf("verify on a full disk: %d\n%s", code, out)
		}
		return ""
	})
	// The failed appends are logged: checked here, not printed.
	if recs := c.Stderr.Records("ledger append"); len(recs) == 0 || !strings.Contains(recs[0], "no space left on device") {
		t.Errorf("no \"ledger append\" error in conch's stderr:\n%s", c.Stderr)
	}
	if out, code := e2etest.CLI(t, "ledger", "verify", "--home", home, "--allow-gaps"); code != 0 {
		t.Fatalf("verify --allow-gaps: %d\n%s", code, out)
	}
	if out, _ := e2etest.CLI(t, "doctor", "--home", home); !strings.Contains(out, "warn  ledger.gaps: ") {
		t.Fatalf("doctor on a ledger with a gap:\n%s", out)
	}

	os.Remove(filler)
	c = e2etest.StartConch(t, home)
	c.Exec(map[string]any{"command": "echo after"})
	closeAndWait(t, c)
	e2etest.Eventually(t, 30*time.Second, func() string {
		var rep ledger.Report
		jout, code := e2etest.CLI(t, "ledger", "verify", "--home", home, "--json")
		if err := json.Unmarshal([]byte(jout), &rep); err != nil || code != 1 || !rep.OK || len(rep.Gaps) != 1 || rep.Gaps[0].Pending || rep.Dropped < 2 {
			return fmt.Sprintf("verify --json after space returned: %d %v %s", code, err, jout)
		}
		return ""
	})
	if out, code := e2etest.CLI(t, "ledger", "verify", "--home", home); code != 1 || !strings.HasPrefix(out, "gaps: ") {
		t.Fatalf("verify after space returned: %d\n%s", code, out)
	}
	tail, _ := e2etest.CLI(t, "ledger", "tail", "--home", home, "-n", "100")
	if !strings.Contains(tail, " gap ") {
		t.Fatalf("tail lacks the gap record:\n%s", tail)
	}
}

// TestDoctorRiskyCLI: doctor warns about a root gateway running agents' commands
// unsandboxed and ungated, and about loosened modes in the home; --fix tightens the
// modes.
func TestDoctorRiskyCLI(t *testing.T) {
	home := ledgerHome(t, "")
	if os.Geteuid() == 0 {
		out, code := e2etest.CLI(t, "doctor", "--home", home)
		if code != 1 || !strings.Contains(out, "warn  gateway.root_unsandboxed: agent main: the gateway runs as root with sandbox.mode=off") {
			t.Fatalf("doctor as root with the default configuration: %d\n%s", code, out)
		}
	}
	gated := e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway"}}}`)
	if out, code := e2etest.CLI(t, "doctor", "--home", gated); code != 0 || strings.Contains(out, "gateway.root_unsandboxed") {
		t.Fatalf("a gated home: %d\n%s", code, out)
	}

	home = ledgerHome(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"on-miss"}}}`)
	os.Chmod(filepath.Join(home, "sessions"), 0o755)
	os.Chmod(filepath.Join(home, "ledger"), 0o750)
	os.Chmod(filepath.Join(home, ledger.KeyFile), 0o640)
	lockFile := filepath.Join(home, "run", "engine.lock")
	if err := os.Chmod(lockFile, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := e2etest.CLI(t, "doctor", "--home", home)
	for _, want := range []string{
		"error home.permissions: " + filepath.Join(home, ledger.KeyFile) + " has mode 640",
		"warn  home.modes: directory " + filepath.Join(home, "sessions") + " has mode 0755, want 0700",
		"warn  home.modes: directory " + filepath.Join(home, "ledger") + " has mode 0750",
		"warn  home.modes: file " + lockFile + " has mode 0644, want 0600",
	} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	out, code = e2etest.CLI(t, "doctor", "--fix", "--home", home)
	if code != 0 || strings.Contains(out, "home.modes: directory") || !strings.Contains(out, "fixed home.modes: "+filepath.Join(home, "sessions")+" 0755 -> 0700") {
		t.Fatalf("doctor --fix: %d\n%s", code, out)
	}
}

// TestLedgerForwardCLI: with ledger.forward, conch mcp sends every record and a
// signed checkpoint to a syslog socket (a real one the test reads), and the
// forwarded checkpoint verifies with the key `conch ledger key` prints.
func TestLedgerForwardCLI(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "log.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	home := ledgerHome(t, `{"ledger":{"forward":{"network":"unixgram","address":"`+sock+`","tag":"conch-audit"}}}`)
	recs, _ := ledger.Tail(home, 0, ledger.Filter{})
	var last string
	seen := map[string]bool{}
	buf := make([]byte, 1<<20)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for len(seen) < len(recs) || !strings.Contains(last, " checkpoint ") {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("after %d of %d records: %v", len(seen), len(recs), err)
		}
		msg := string(buf[:n])
		if !strings.Contains(msg, " conch-audit[") {
			t.Fatalf("message %q", msg)
		}
		for _, r := range recs {
			if strings.Contains(msg, `"hash":"`+r.Hash+`"`) {
				seen[r.Hash] = true
			}
		}
		last = msg
	}
	pub, _ := e2etest.CLI(t, "ledger", "key", "--home", home)
	if out, code := e2etest.CLI(t, "ledger", "verify", "--home", home, "--pubkey", strings.TrimSpace(pub), "--checkpoint", last); code != 0 || !strings.Contains(out, "1 given checkpoints found") {
		t.Fatalf("verify against the forwarded checkpoint %q: %d\n%s", last, code, out)
	}
}

// TestLedgerBrokenHeadCLI: cutting records and then breaking HEAD (unsigned, removed,
// garbage) instead of forging it does not pass either once conch appends again (the
// gateway running a command, or `conch ledger key`): the append writes a gap record
// saying HEAD did not vouch for the end, which verify, with the saved public key too,
// reports. Replacing the key is recorded the same way.
func TestLedgerBrokenHeadCLI(t *testing.T) {
	home := ledgerHome(t, "")
	pubOut, code := e2etest.CLI(t, "ledger", "key", "--home", home)
	if code != 0 {
		t.Fatalf("ledger key: %d %q", code, pubOut)
	}
	pub := strings.TrimSpace(pubOut)
	recs, _ := ledger.Tail(home, 0, ledger.Filter{})
	headPath := func(h string) string { return filepath.Join(h, "ledger", "HEAD") }
	breaks := map[string]func(h string){
		"unsigned": func(string) {},
		"removed":  func(h string) { os.Remove(headPath(h)) },
		"garbage":  func(h string) { os.WriteFile(headPath(h), []byte("{"), 0o600) },
	}
	for k := 1; k < len(recs); k++ {
		for name, brk := range breaks {
			h := cloneLedger(t, home)
			cutTail(t, h, k, nil)
			brk(h)
			if k == 1 {
				// The gateway itself appends.
				c := e2etest.StartConch(t, h)
				if r := c.Exec(map[string]any{"command": "echo after"}); r.Str("status") != "completed" {
					t.Fatalf("exec: %q %v", r.Text, r.D)
				}
				closeAndWait(t, c)
			} else if out, code := e2etest.CLI(t, "ledger", "key", "--home", h); code != 0 || strings.TrimSpace(out) != pub {
				t.Fatalf("cut %d, HEAD %s: ledger key %d %q", k, name, code, out)
			}
			// Against the saved key it is a truncation, whatever the flags.
			for _, flags := range [][]string{nil, {"--allow-gaps"}} {
				out, code := e2etest.CLI(t, append([]string{"ledger", "verify", "--home", h, "--pubkey", pub}, flags...)...)
				if code != 1 || !strings.HasPrefix(out, "broken at seq ") || !strings.Contains(out, "truncated: an unknown number of records") || !strings.Contains(out, "rebuilt from the log at seq") {
					t.Fatalf("cut %d, HEAD %s, then an append: verify --pubkey %v: %d\n%s", k, name, flags, code, out)
				}
			}
			// Against the home's own key it is a gap of unknown size.
			if out, code := e2etest.CLI(t, "ledger", "verify", "--home", h); code != 1 || !strings.HasPrefix(out, "gaps: an unknown number of records dropped in 1 gaps") {
				t.Fatalf("cut %d, HEAD %s: verify %d\n%s", k, name, code, out)
			}
		}
	}
	// The key replaced: the next append says so.
	h := cloneLedger(t, home)
	os.Remove(filepath.Join(h, ledger.KeyFile))
	newPub, code := e2etest.CLI(t, "ledger", "key", "--home", h)
	if code != 0 || newPub == pubOut {
		t.Fatalf("ledger key after removing the key: %d %q", code, newPub)
	}
	if out, code := e2etest.CLI(t, "ledger", "verify", "--home", h); code != 1 || !strings.Contains(out, "not signed by the ledger key") {
		t.Fatalf("verify after the key was replaced: %d\n%s", code, out)
	}
}
