package ledger

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// collector is a real syslog or journald socket: a unix datagram socket the test reads.
type collector struct {
	t    *testing.T
	conn *net.UnixConn
	path string
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &collector{t: t, conn: conn, path: path}
}

// read returns the next message, failing the test after a generous deadline.
func (c *collector) read() string {
	c.t.Helper()
	buf := make([]byte, 1<<20)
	c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := c.conn.Read(buf)
	if err != nil {
		c.t.Fatalf("collector: %v", err)
	}
	return string(buf[:n])
}

// TestForwardSyslog: every record and a signed checkpoint per write reach a syslog
// socket, and the forwarded checkpoint later proves a truncation.
func TestForwardSyslog(t *testing.T) {
	col := newCollector(t)
	home := t.TempDir()
	l := openLedger(t, home, Options{Forward: &Forward{Network: "unixgram", Address: col.path}})
	recs := appendN(t, l, 3)
	var ck string
	for i := range recs {
		rec := col.read()
		if !strings.HasPrefix(rec, "<86>") || !strings.Contains(rec, " conch-ledger[") || !strings.Contains(rec, `"hash":"`+recs[i].Hash+`"`) {
			t.Fatalf("message %d: %q", i, rec)
		}
		ck = col.read()
		if !strings.Contains(ck, fmt.Sprintf(": checkpoint %d:%s:", recs[i].Seq, recs[i].Hash)) {
			t.Fatalf("checkpoint %d: %q", i, ck)
		}
	}
	c, err := ParseCheckpoint(ck)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := EnsureKey(home)
	if !c.Valid(pub) {
		t.Fatalf("forwarded checkpoint does not verify: %q", ck)
	}
	l.Close()
	h := truncate(t, home, 1)
	writeHead(Dir(home), h, mustKey(t, home)) // even with the key, the forwarded copy tells
	if rep, _ := VerifyWith(home, VerifyOptions{PublicKey: pub}); !rep.OK {
		t.Fatalf("re-signed truncation, without the forwarded checkpoint: %s", rep)
	}
	if rep, _ := VerifyWith(home, VerifyOptions{PublicKey: pub, Checkpoints: []Checkpoint{c}}); rep.OK {
		t.Fatalf("re-signed truncation, with the forwarded checkpoint: %s", rep)
	}
}

// TestForwardJournald: the journald native protocol, on a socket the test owns.
func TestForwardJournald(t *testing.T) {
	col := newCollector(t)
	l := openLedger(t, t.TempDir(), Options{Forward: &Forward{Network: "journald", Address: col.path, Tag: "audit"}})
	r := appendN(t, l, 1)[0]
	msg := col.read()
	if !strings.HasPrefix(msg, "MESSAGE={") || !strings.Contains(msg, r.Hash) || !strings.Contains(msg, "\nSYSLOG_IDENTIFIER=audit\n") || !strings.Contains(msg, "\nPRIORITY=6\n") {
		t.Fatalf("journald message: %q", msg)
	}
}

// TestForwardNeverBlocks: a collector that does not read, and one that is not there,
// never slow an append beyond its own work; what could not be sent is counted and
// announced once the collector reads again.
func TestForwardNeverBlocks(t *testing.T) {
	col := newCollector(t)
	home := t.TempDir()
	l := openLedger(t, home, Options{Forward: &Forward{Network: "unixgram", Address: col.path}})
	// Many more messages than the queue and the socket buffer hold, in big batches.
	batch := make([]Record, 500)
	for i := range batch {
		batch[i] = Record{Type: TypeNode, Fields: map[string]any{"action": "pair", "name": strings.Repeat("x", 200)}}
	}
	for range 12 {
		if _, err := l.AppendBatch(batch); err != nil {
			t.Fatal(err)
		}
	}
	// Read until the drop notice comes.
	for {
		msg := col.read()
		if i := strings.Index(msg, "forward-gap dropped="); i >= 0 {
			var n int
			fmt.Sscanf(msg[i:], "forward-gap dropped=%d", &n)
			if n <= 0 {
				t.Fatalf("drop notice: %q", msg)
			}
			break
		}
	}
	start := time.Now()
	l.Close()
	if d := time.Since(start); d > forwardDrain+10*time.Second {
		t.Fatalf("close took %v", d)
	}

	// No collector at all: appends still succeed.
	l2 := openLedger(t, t.TempDir(), Options{Forward: &Forward{Network: "unixgram", Address: filepath.Join(t.TempDir(), "none.sock")}})
	appendN(t, l2, 3)
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.TempDir(), Options{Forward: &Forward{Network: "carrier-pigeon"}}); err == nil {
		t.Fatal("an unknown network was accepted")
	}
}
