package ledger_test

import (
	"fmt"
	"log"
	"os"

	"github.com/conchsh/conch/internal/store/ledger"
)

func ExampleLedger_Append() {
	home, err := os.MkdirTemp("", "conch")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)

	l, err := ledger.Open(home, ledger.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	// Fields: a typed struct of this package, or a plain map.
	if _, err := l.Append(ledger.Record{Type: ledger.TypeExec, Agent: "main", Fields: ledger.Exec{
		RequestID: "r1", SessionID: "calm-gulf", Host: "gateway", Argv: []string{"git", "status"}, Cwd: "/src",
	}}); err != nil {
		log.Fatal(err)
	}
	r, err := l.Append(ledger.Record{Type: ledger.TypeEnd, Agent: "main", Fields: map[string]any{
		"sessionId": "calm-gulf", "state": "exited", "exitCode": 0,
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Seq, len(r.Hash))

	rep, err := ledger.Verify(home)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.OK, rep.Records, rep.Head == r.Hash)

	recs, err := ledger.Tail(home, 10, ledger.Filter{Session: "calm-gulf"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(recs), recs[0].Type, recs[1].Type)
	// Output:
	// 2 64
	// true 2 true
	// 2 exec end
}

func ExampleCanonical() {
	out, err := ledger.Canonical([]byte(`{"b": 1.50, "a": "\u00e9\n", "c": [1E3, true]}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))
	// Output: {"a":"é\n","b":1.5,"c":[1000,true]}
}

// ExampleVerifyWith checks a ledger against evidence kept elsewhere: the public key
// printed when the ledger was set up, and a checkpoint from an earlier verify (or from
// the forwarded syslog stream).
func ExampleVerifyWith() {
	home, err := os.MkdirTemp("", "conch")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)

	pub, err := ledger.EnsureKey(home) // what `conch ledger key` prints
	if err != nil {
		log.Fatal(err)
	}
	saved := ledger.FormatPublicKey(pub)

	l, err := ledger.Open(home, ledger.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for _, action := range []string{"pair", "approve"} {
		l.Append(ledger.Record{Type: ledger.TypeNode, Fields: ledger.Node{Action: action, NodeID: "n1", By: "cli"}})
	}
	l.Close()
	rep, _ := ledger.VerifyWith(home, ledger.VerifyOptions{})
	checkpoint := rep.Checkpoint // kept elsewhere

	key, _ := ledger.ParsePublicKey(saved)
	ck, _ := ledger.ParseCheckpoint(checkpoint)
	rep, err = ledger.VerifyWith(home, ledger.VerifyOptions{PublicKey: key, Checkpoints: []ledger.Checkpoint{ck}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.OK, rep.Records, rep.Signed, rep.Checkpoints)
	// Output: true 2 key 1
}
