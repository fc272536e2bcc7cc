package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// truncate cuts the last k records of the (single-file) ledger of home, as an attacker
// with write access to the home would, and returns the head of what is left.
func truncate(t *testing.T, home string, k int) head {
	t.Helper()
	path := filepath.Join(Dir(home), fileName(1))
	lines := readLines(t, path)
	lines = lines[:len(lines)-k]
	writeLines(t, path, lines)
	last, err := parseRecord(lines[len(lines)-1])
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	return head{Seq: seqOf(last), Hash: last["hash"].(string), File: fileName(1), Size: st.Size()}
}

// writeRawHead writes HEAD as an attacker would: any content, no key needed.
func writeRawHead(t *testing.T, home string, h head) {
	t.Helper()
	b, _ := json.Marshal(h)
	if err := os.WriteFile(filepath.Join(Dir(home), headName), append(b, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
}

// copyHome copies a home's ledger and key to a new directory.
func copyHome(t *testing.T, home string) string {
	t.Helper()
	dst := t.TempDir()
	os.MkdirAll(Dir(dst), 0o700)
	for _, rel := range []string{KeyFile, filepath.Join("ledger", headName), filepath.Join("ledger", fileName(1))} {
		b, err := os.ReadFile(filepath.Join(home, rel))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	}
	return dst
}

// TestTruncationAttacks: removing records from the end and rewriting HEAD to match is
// caught, for every number of removed records and every way to rewrite HEAD that does
// not need the key; with a key of the attacker's own, by the saved public key; and
// replaying an old signed HEAD, by a checkpoint kept from before.
func TestTruncationAttacks(t *testing.T) {
	const n = 8
	home := t.TempDir()
	l := openLedger(t, home, Options{})
	appendN(t, l, n)
	l.Close()
	pub, err := EnsureKey(home)
	if err != nil {
		t.Fatal(err)
	}
	before, err := VerifyWith(home, VerifyOptions{PublicKey: pub})
	if err != nil || !before.OK || before.Signed != "key" {
		t.Fatalf("intact ledger: %+v %v", before, err)
	}
	saved, err := ParseCheckpoint(before.Checkpoint)
	if err != nil || saved.Seq != n || !saved.Valid(pub) {
		t.Fatalf("checkpoint %q: %+v %v", before.Checkpoint, saved, err)
	}
	signed, _, _ := readHead(Dir(home))

	attackerKey := func(t *testing.T, home string) ed25519.PrivateKey {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		der, _ := x509.MarshalPKCS8PrivateKey(priv)
		os.WriteFile(KeyPath(home), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
		return priv
	}
	rewrites := []struct {
		name string
		head func(t *testing.T, home string, h head) head
		// plain: Verify without outside evidence catches it.
		plain bool
	}{
		{"unsigned HEAD", func(t *testing.T, home string, h head) head { return h }, true},
		{"old signature kept", func(t *testing.T, home string, h head) head {
			h.TS, h.Sig = signed.TS, signed.Sig
			return h
		}, true},
		{"key deleted", func(t *testing.T, home string, h head) head {
			os.Remove(KeyPath(home))
			return h
		}, false},
		{"attacker's key", func(t *testing.T, home string, h head) head {
			ck := signCheckpoint(attackerKey(t, home), h.Seq, h.Hash, signed.checkpoint().TS)
			h.TS, h.Sig = ck.TS.UnixMilli(), base64.RawURLEncoding.EncodeToString(ck.Sig)
			return h
		}, false},
	}
	for k := 1; k < n; k++ {
		for _, rw := range rewrites {
			h := copyHome(t, home)
			writeRawHead(t, h, rw.head(t, h, truncate(t, h, k)))
			rep, err := Verify(h)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK == rw.plain {
				t.Errorf("cut %d, %s: plain verify ok=%v: %s", k, rw.name, rep.OK, rep)
			}
			if rep, _ := VerifyWith(h, VerifyOptions{PublicKey: pub}); rep.OK || rep.File != headName {
				t.Errorf("cut %d, %s: verify with the saved key: %s", k, rw.name, rep)
			}
			if rep, _ := VerifyWith(h, VerifyOptions{Checkpoints: []Checkpoint{{Seq: saved.Seq, Hash: saved.Hash}}}); rep.OK || !strings.Contains(rep.Reason, "truncated") {
				t.Errorf("cut %d, %s: verify with the saved checkpoint: %s", k, rw.name, rep)
			}
		}
	}

	// A HEAD signed earlier, replayed over a ledger cut back to it, verifies with the key
	// alone (the limit of what the files can tell), but not against a later checkpoint.
	h := copyHome(t, home)
	cut := truncate(t, h, 3)
	old := cut
	ck := signCheckpoint(mustKey(t, home), cut.Seq, cut.Hash, signed.checkpoint().TS.Add(-60e9))
	old.TS, old.Sig = ck.TS.UnixMilli(), base64.RawURLEncoding.EncodeToString(ck.Sig) // as HEAD was when seq 5 was last
	writeRawHead(t, h, old)
	if rep, _ := VerifyWith(h, VerifyOptions{PublicKey: pub}); !rep.OK {
		t.Fatalf("a replayed signed HEAD: %s", rep)
	}
	rep, _ := VerifyWith(h, VerifyOptions{PublicKey: pub, Checkpoints: []Checkpoint{saved}})
	if rep.OK || !strings.Contains(rep.Reason, "truncated: a given checkpoint names seq 8, the last record is seq 5") {
		t.Fatalf("a replayed signed HEAD against the saved checkpoint: %s", rep)
	}

	// Records rewritten (and re-chained) are caught by a checkpoint of any of them.
	h = copyHome(t, home)
	path := filepath.Join(Dir(h), fileName(1))
	lines := readLines(t, path)
	m, _ := parseRecord(lines[n-1])
	m["agent"] = "someone-else"
	delete(m, "hash")
	hash, _ := recordHash(m)
	m["hash"] = hash
	var b bytes.Buffer
	writeCanonical(&b, m)
	lines[n-1] = []byte(b.String() + "\n")
	writeLines(t, path, lines)
	st, _ := os.Stat(path)
	writeRawHead(t, h, head{Seq: n, Hash: hash, File: fileName(1), Size: st.Size()})
	if rep, _ := VerifyWith(h, VerifyOptions{Checkpoints: []Checkpoint{{Seq: n, Hash: saved.Hash}}}); rep.OK || !strings.Contains(rep.Reason, "does not match the given checkpoint") {
		t.Fatalf("rewritten record against its checkpoint: %s", rep)
	}
	// A forged signature on a given checkpoint is refused.
	bad := saved
	bad.Hash = hash
	if rep, _ := VerifyWith(home, VerifyOptions{PublicKey: pub, Checkpoints: []Checkpoint{bad}}); rep.OK {
		t.Fatalf("a checkpoint with a forged signature was accepted: %s", rep)
	}
}

func mustKey(t *testing.T, home string) ed25519.PrivateKey {
	t.Helper()
	k, err := LoadKey(home)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKeyAndCheckpointText: the key is 0600 and stable, an existing unsigned HEAD is
// signed when the key is created, and checkpoints round-trip through their text.
func TestKeyAndCheckpointText(t *testing.T) {
	home := t.TempDir()
	l := openLedger(t, home, Options{})
	appendN(t, l, 2)
	l.Close()
	// A ledger from before signing: no key, an unsigned HEAD.
	os.Remove(KeyPath(home))
	h, _, _ := readHead(Dir(home))
	writeHead(Dir(home), h, nil)
	if rep, _ := Verify(home); !rep.OK || rep.Signed != "" {
		t.Fatalf("an unsigned ledger without a key: %s %+v", rep, rep)
	}
	pub, err := EnsureKey(home)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(KeyPath(home))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	again, _ := EnsureKey(home)
	if !pub.Equal(again) {
		t.Fatal("EnsureKey made a second key")
	}
	rep, _ := VerifyWith(home, VerifyOptions{PublicKey: pub})
	if !rep.OK || rep.Signed != "key" {
		t.Fatalf("HEAD not signed when the key was created: %s %+v", rep, rep)
	}
	text := FormatPublicKey(pub)
	if back, err := ParsePublicKey(" " + text + "\n"); err != nil || !back.Equal(pub) {
		t.Fatalf("public key %q round trip: %v", text, err)
	}
	ck, err := ParseCheckpoint("Dec  1 12:00:00 host conch-ledger[12]: checkpoint " + rep.Checkpoint)
	if err != nil || ck.String() != rep.Checkpoint || !ck.Valid(pub) {
		t.Fatalf("checkpoint %q from a syslog line: %+v %v", rep.Checkpoint, ck, err)
	}
	for _, bad := range []string{"", "x", "0:" + strings.Repeat("a", 64), "1:zz", "1:" + strings.Repeat("a", 64) + ":5", "1:" + strings.Repeat("a", 64) + ":5:!!"} {
		if _, err := ParseCheckpoint(bad); err == nil {
			t.Errorf("checkpoint %q parsed", bad)
		}
	}
	for _, bad := range []string{"", "ed25519:", "ed25519:AAAA", "rsa:" + text[8:]} {
		if _, err := ParsePublicKey(bad); err == nil {
			t.Errorf("public key %q parsed", bad)
		}
	}
}

// TestUnusableKey: a damaged key file does not stop the audit trail; the records are
// written with an unsigned HEAD, which Verify then cannot check and says so.
func TestUnusableKey(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(KeyPath(home), []byte("not a key"), 0o600)
	l := openLedger(t, home, Options{})
	if l.KeyError() == nil {
		t.Fatal("no key error")
	}
	if _, err := l.Append(Record{Type: TypeNode}); err != nil {
		t.Fatalf("append with a damaged key: %v", err)
	}
	if _, err := Verify(home); err == nil || !strings.Contains(err.Error(), "not a PEM private key") {
		t.Fatalf("verify with a damaged key: %v", err)
	}
	if _, err := EnsureKey(home); err == nil {
		t.Fatal("EnsureKey returned a key")
	}
}

// TestAppendAfterTamperingLeavesTrace: an appender (the gateway, already running or
// started afterwards) that finds HEAD missing, unreadable or not signed by its key must
// not sign the ledger as it finds it: otherwise cutting records off the end (or rewriting
// them) and then breaking HEAD passes every later verify. For every cut and every way of
// breaking HEAD without the key, the next append leaves a gap record saying so, or
// verification against the saved public key fails.
func TestAppendAfterTamperingLeavesTrace(t *testing.T) {
	const n = 6
	home := t.TempDir()
	l := openLedger(t, home, Options{})
	appendN(t, l, n)
	l.Close()
	pub, err := EnsureKey(home)
	if err != nil {
		t.Fatal(err)
	}
	signed, _, _ := readHead(Dir(home))
	headPath := func(h string) string { return filepath.Join(Dir(h), headName) }
	breaks := []struct {
		name string
		do   func(t *testing.T, home string, cut head)
	}{
		{"HEAD removed", func(t *testing.T, home string, cut head) { os.Remove(headPath(home)) }},
		{"HEAD garbage", func(t *testing.T, home string, cut head) { os.WriteFile(headPath(home), []byte("{garbage"), 0o600) }},
		{"HEAD empty", func(t *testing.T, home string, cut head) { os.WriteFile(headPath(home), nil, 0o600) }},
		{"HEAD unsigned", func(t *testing.T, home string, cut head) { writeRawHead(t, home, cut) }},
		{"HEAD with the old signature", func(t *testing.T, home string, cut head) {
			cut.TS, cut.Sig = signed.TS, signed.Sig
			writeRawHead(t, home, cut)
		}},
		{"HEAD with the old signature, key removed", func(t *testing.T, home string, cut head) {
			cut.TS, cut.Sig = signed.TS, signed.Sig
			writeRawHead(t, home, cut)
			os.Remove(KeyPath(home))
		}},
	}
	for k := 1; k < n; k++ {
		for _, b := range breaks {
			for _, restart := range []bool{false, true} {
				h := copyHome(t, home)
				var running *Ledger
				if !restart {
					running = openLedger(t, h, Options{})
				}
				b.do(t, h, truncate(t, h, k))
				if restart {
					running = openLedger(t, h, Options{})
				}
				if _, err := running.Append(Record{Type: TypeNode}); err != nil {
					t.Fatalf("cut %d, %s: append: %v", k, b.name, err)
				}
				running.Close()
				rep, err := VerifyWith(h, VerifyOptions{PublicKey: pub})
				if err != nil {
					t.Fatal(err)
				}
				if rep.OK {
					t.Errorf("cut %d, %s, restart=%v: verify against the saved key passes: %s", k, b.name, restart, rep)
				}
			}
		}
	}

	// Every record removed and HEAD broken: the new first record is a gap record.
	for _, files := range []bool{true, false} {
		h := copyHome(t, home)
		if files {
			os.Truncate(filepath.Join(Dir(h), fileName(1)), 0)
		} else {
			os.Remove(filepath.Join(Dir(h), fileName(1)))
		}
		os.WriteFile(headPath(h), []byte("x"), 0o600)
		l := openLedger(t, h, Options{})
		if _, err := l.Append(Record{Type: TypeNode}); err != nil {
			t.Fatal(err)
		}
		l.Close()
		if rep, _ := VerifyWith(h, VerifyOptions{PublicKey: pub}); rep.OK || rep.BrokenAt != 1 || !strings.HasPrefix(rep.Reason, "truncated: ") {
			t.Errorf("ledger emptied (file kept %v): %s", files, rep)
		}
		if rep, _ := Verify(h); !rep.OK || rep.Gaps[0].Seq != 1 || !rep.Gaps[0].Unknown {
			t.Errorf("ledger emptied (file kept %v), no key given: %s", files, rep)
		}
	}
}

// TestCheckpointsAllCount: every given checkpoint must hold, also when several name the
// same seq (checkpoints collected from a syslog stream anyone on the machine can write
// to): a spoofed line naming a rewritten record must not displace the real one.
func TestCheckpointsAllCount(t *testing.T) {
	home := t.TempDir()
	l := openLedger(t, home, Options{})
	appendN(t, l, 4)
	l.Close()
	rep, _ := Verify(home)
	real, err := ParseCheckpoint(rep.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	// The last record rewritten (HEAD is then broken too, but a checkpoint alone must
	// also say so: check the record, not HEAD).
	path := filepath.Join(Dir(home), fileName(1))
	lines := readLines(t, path)
	lines[3] = rehash(t, bytes.Replace(lines[3], []byte(`"main"`), []byte(`"xx"`), 1))
	writeLines(t, path, lines)
	forged, _ := parseRecord(lines[3])
	spoof, err := ParseCheckpoint("Dec  1 12:00:00 host conch-ledger[1]: checkpoint 4:" + forged["hash"].(string))
	if err != nil {
		t.Fatal(err)
	}
	for _, order := range [][]Checkpoint{{real, spoof}, {spoof, real}} {
		rep, _ := VerifyWith(home, VerifyOptions{Checkpoints: order})
		if rep.OK || rep.BrokenAt != 4 || !strings.Contains(rep.Reason, "does not match the given checkpoint") {
			t.Errorf("checkpoints %v: %s", order, rep)
		}
	}
}

// TestRebuiltHeadIsATruncation: an engine that rebuilds HEAD from the log (after the end
// was cut and HEAD broken) signs the end it found with the home's key, so the saved public
// key verifies it: verification against that key must still report a truncation, whatever
// the flags, and the gap record says that the number of records lost is unknown rather
// than 0. A checkpoint seen after the rebuild vouches for the log from there.
func TestRebuiltHeadIsATruncation(t *testing.T) {
	home := t.TempDir()
	l := openLedger(t, home, Options{})
	appendN(t, l, 6)
	l.Close()
	pub, err := EnsureKey(home)
	if err != nil {
		t.Fatal(err)
	}
	truncate(t, home, 3)
	os.Remove(filepath.Join(Dir(home), headName))
	l = openLedger(t, home, Options{})
	if _, err := l.Append(Record{Type: TypeNode}); err != nil {
		t.Fatal(err)
	}
	l.Close()

	rep, err := VerifyWith(home, VerifyOptions{PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.BrokenAt != 4 || !strings.HasPrefix(rep.Reason, "truncated: an unknown number of records") {
		t.Errorf("against the saved key: %s", rep)
	}
	own, _ := Verify(home)
	if !own.OK || len(own.Gaps) != 1 || !own.Gaps[0].Unknown || own.Dropped != 0 ||
		!strings.HasPrefix(own.String(), "gaps: an unknown number of records dropped in 1 gaps") {
		t.Errorf("against the home's key: %s %+v", own, own.Gaps)
	}
	recs, _ := Tail(home, 2, Filter{})
	if s := recs[0].String(); !strings.Contains(s, "dropped=unknown") {
		t.Errorf("tail: %s", s)
	}
	// The operator saw the rebuilt end: its checkpoint vouches for it.
	ck, err := ParseCheckpoint(own.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if rep, _ := VerifyWith(home, VerifyOptions{PublicKey: pub, Checkpoints: []Checkpoint{ck}}); !rep.OK || len(rep.Gaps) != 1 {
		t.Errorf("with a checkpoint after the rebuild: %s", rep)
	}
}
