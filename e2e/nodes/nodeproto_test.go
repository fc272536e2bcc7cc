package nodes

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestNodePlanBinding drives a real `conch node` from a test peer that
// speaks the gateway side of the protocol, to send what a real gateway
// never sends: replayed plans, plans that do not match the run, and
// unapproved runs of plans that need approval.
func TestNodePlanBinding(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conns := make(chan *websocket.Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer cnj_test" && r.Header.Get("Authorization") != "Bearer cnt_test" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c.SetReadLimit(8 << 20)
		b, _ := json.Marshal(map[string]string{"nonce": "abc"})
		f, _ := json.Marshal(apitype.Frame{Type: "event", Event: "connect.challenge", Payload: b})
		c.Write(ctx, websocket.MessageText, f)
		_, hb, err := c.Read(ctx)
		if err != nil {
			return
		}
		var hello apitype.Frame
		json.Unmarshal(hb, &hello)
		b, _ = json.Marshal(apitype.NodeHelloReply{Status: "paired"})
		f, _ = json.Marshal(apitype.Frame{Type: "res", ID: hello.ID, OK: true, Payload: b})
		c.Write(ctx, websocket.MessageText, f)
		b, _ = json.Marshal(map[string]string{"nodeToken": "cnt_test"})
		f, _ = json.Marshal(apitype.Frame{Type: "event", Event: "node.paired", Payload: b})
		c.Write(ctx, websocket.MessageText, f)
		conns <- c
		<-ctx.Done()
	}))
	defer srv.Close()
	home := e2etest.NewHome(t, `{"tools":{"exec":{"security":"allowlist","ask":"on-miss"}}}`)
	e2etest.StartNode(t, home, nil, "--gateway", srv.URL, "--token", "cnj_test")
	var c *websocket.Conn
	select {
	case c = <-conns:
	case <-ctx.Done():
		t.Fatal("node did not connect")
	}
	n := 0
	call := func(method string, params any) apitype.Frame {
		t.Helper()
		n++
		id := fmt.Sprintf("t%d", n)
		b, _ := json.Marshal(params)
		f, _ := json.Marshal(apitype.Frame{Type: "req", ID: id, Method: method, Params: b})
		if err := c.Write(ctx, websocket.MessageText, f); err != nil {
			t.Fatal(err)
		}
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var r apitype.Frame
			json.Unmarshal(b, &r)
			if r.Type == "res" && r.ID == id {
				return r
			}
		}
	}
	empty := sha256.Sum256(nil)
	envHash := hex.EncodeToString(empty[:])
	wd := t.TempDir()
	script := filepath.Join(wd, "job.sh")
	os.WriteFile(script, []byte("echo job\n"), 0o644)
	prepare := func(cmd string) apitype.NodePrepareReply {
		t.Helper()
		r := call("system.run.prepare", apitype.NodePrepareParams{Command: []string{"/bin/sh", "-lc", cmd}, RawCommand: cmd, Cwd: wd, AgentID: "main", EnvHash: envHash})
		if !r.OK {
			t.Fatalf("prepare %q: %v", cmd, r.Error)
		}
		var p apitype.NodePrepareReply
		json.Unmarshal(r.Payload, &p)
		return p
	}
	run := func(p apitype.NodePrepareReply, sid string, approved bool, mutate func(*apitype.NodeRunParams)) apitype.Frame {
		rp := apitype.NodeRunParams{PlanID: p.PlanID, Command: p.Plan.Argv, RawCommand: p.Plan.RawCommand, Cwd: p.Plan.Cwd,
			AgentID: "main", RunID: "r-" + sid, SessionID: sid, Approved: approved, Stream: true, Stdin: "closed"}
		if mutate != nil {
			mutate(&rp)
		}
		return call("system.run", rp)
	}
	wantErr := func(f apitype.Frame, text string) {
		t.Helper()
		if f.OK || f.Error == nil || f.Error.Message != text {
			t.Fatalf("want error %q, got %+v", text, f)
		}
	}

	// rawCommand must match the argv.
	r := call("system.run.prepare", apitype.NodePrepareParams{Command: []string{"/bin/sh", "-lc", "echo a"}, RawCommand: "echo b", AgentID: "main", EnvHash: envHash})
	wantErr(r, "INVALID_REQUEST: rawCommand does not match command")
	r = call("system.run.prepare", apitype.NodePrepareParams{Command: []string{"/bin/sh", "-lc", "true"}, RawCommand: "true", Cwd: filepath.Join(wd, "missing"), AgentID: "main", EnvHash: envHash})
	wantErr(r, "SYSTEM_RUN_DENIED: approval requires an existing canonical cwd")

	// A miss needs approval: unapproved runs are refused, and the plan is
	// single-use even after a refusal.
	p := prepare("sh job.sh")
	if !p.Verdict.RequiresApproval || p.Plan.Script == nil || len(p.Plan.Exes) == 0 || p.PlanHash == "" {
		t.Fatalf("plan: %+v", p)
	}
	wantErr(run(p, "pb-one", false, nil), "SYSTEM_RUN_DENIED: approval required")
	wantErr(run(p, "pb-two", true, nil), "SYSTEM_RUN_DENIED: execution plan mismatch")

	// Approved runs must match the plan exactly.
	p = prepare("sh job.sh")
	wantErr(run(p, "pb-three", true, func(r *apitype.NodeRunParams) { r.RawCommand = "sh other.sh"; r.Command[2] = "sh other.sh" }), "SYSTEM_RUN_DENIED: execution plan mismatch")
	p = prepare("sh job.sh")
	wantErr(run(p, "pb-four", true, func(r *apitype.NodeRunParams) { r.Env = map[string]string{"X": "1"} }), "SYSTEM_RUN_DENIED: execution plan mismatch")
	// The script changed between approval and run.
	p = prepare("sh job.sh")
	os.WriteFile(script, []byte("echo changed\n"), 0o644)
	wantErr(run(p, "pb-five", true, nil), "SYSTEM_RUN_DENIED: approval script operand changed before execution")
	// A symlink retargeted between the plan and the run: the planned
	// realpaths hash the same, but the words name other files now.
	os.WriteFile(filepath.Join(wd, "other.sh"), []byte("echo other\n"), 0o644)
	os.WriteFile(filepath.Join(wd, "tool"), []byte("#!/bin/sh\necho tool\n"), 0o755)
	os.WriteFile(filepath.Join(wd, "evil"), []byte("#!/bin/sh\necho evil\n"), 0o755)
	for i, tc := range []struct{ cmd, link, from, to, want string }{
		{"sh link.sh", "link.sh", "job.sh", "other.sh", "approval script operand changed before execution"},
		{"./x", "x", "tool", "evil", "approval executable changed before execution"},
		{"nice ./x", "x", "tool", "evil", "approval executable changed before execution"},
	} {
		lp := filepath.Join(wd, tc.link)
		os.Remove(lp)
		os.Symlink(filepath.Join(wd, tc.from), lp)
		p = prepare(tc.cmd)
		os.Remove(lp)
		os.Symlink(filepath.Join(wd, tc.to), lp)
		wantErr(run(p, fmt.Sprintf("pb-link-%d", i), true, nil), "SYSTEM_RUN_DENIED: "+tc.want)
	}
	// The cwd was replaced.
	p = prepare("sh job.sh")
	os.Rename(wd, wd+".old")
	os.Mkdir(wd, 0o700)
	os.WriteFile(script, []byte("echo changed\n"), 0o644)
	wantErr(run(p, "pb-six", true, nil), "SYSTEM_RUN_DENIED: approval cwd changed before execution")

	// A matching approved run starts once; a replay of its plan is refused.
	p = prepare("sh job.sh")
	if r := run(p, "pb-seven", true, nil); !r.OK {
		t.Fatalf("approved run: %+v", r.Error)
	}
	wantErr(run(p, "pb-eight", true, nil), "SYSTEM_RUN_DENIED: execution plan mismatch")
	// A session id already used on the node is refused.
	p = prepare("sh job.sh")
	wantErr(run(p, "pb-seven", true, nil), "INVALID_REQUEST: session id in use")
	// Numbers outside their declared ranges are refused naming the field,
	// before anything runs; the node keeps answering.
	for _, m := range []func(*apitype.NodeRunParams){
		func(r *apitype.NodeRunParams) { r.Cols = 1 << 20 },
		func(r *apitype.NodeRunParams) { r.Rows = -1 },
		func(r *apitype.NodeRunParams) { r.TimeoutMs = -5 },
		func(r *apitype.NodeRunParams) { r.Since = 1 << 62 },
		func(r *apitype.NodeRunParams) { r.Env = map[string]string{"A": "x\x00"} },
	} {
		p = prepare("sh job.sh")
		if r := run(p, "pb-nine", true, m); r.OK || r.Error == nil || !strings.HasPrefix(r.Error.Message, `INVALID_REQUEST: Invalid parameter "`) {
			t.Fatalf("out-of-range run accepted: %+v", r)
		}
	}
	for _, params := range []string{`{"sessionId":"pb-seven","since":-1}`, `{"sessionId":"pb-seven","since":1e300}`, `{"sessionId":"pb-seven","since":1.5}`} {
		if r := call("system.session.read", json.RawMessage(params)); r.OK || r.Error == nil || !strings.HasPrefix(r.Error.Message, "INVALID_REQUEST: ") {
			t.Fatalf("session.read %s accepted: %+v", params, r)
		}
	}
	for _, c := range []struct{ method, params string }{
		{"system.session.kill", `{"sessionId":"pb-seven","request":{"v":1,"graceMs":-5}}`},
		{"system.session.resize", `{"sessionId":"pb-seven","request":{"v":1,"cols":70000,"rows":5}}`},
		{"system.session.signal", `{"sessionId":"pb-seven","request":{"v":1,"sig":4096}}`},
		{"system.session.trim", `{"sessionId":"pb-seven","request":{"v":1,"maxBytes":-1}}`},
	} {
		if r := call(c.method, json.RawMessage(c.params)); r.OK || r.Error == nil || !strings.HasPrefix(r.Error.Message, `INVALID_REQUEST: Invalid parameter "`) {
			t.Fatalf("%s %s accepted: %+v", c.method, c.params, r)
		}
	}
	if !strings.HasPrefix(p.Plan.Cwd, "/") {
		t.Fatalf("cwd not canonical: %s", p.Plan.Cwd)
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// TestNodeTLSPinned pairs a node over TLS with the gateway's certificate
// pinned (--ca with a leaf certificate); a node pinning another
// certificate never connects.
func TestNodeTLSPinned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := writeCert(t, dir, "gateway")
	other, _ := writeCert(t, dir, "other")
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(g.Base, "https://") {
		t.Fatalf("gateway base %s", g.Base)
	}
	cli := func(args ...string) string {
		t.Helper()
		argv := append(args, "--home", gh)
		if args[0] == "exec" {
			argv = append([]string{"exec", "--home", gh}, args[1:]...)
		}
		out, err := exec.Command(e2etest.ConchBin, argv...).CombinedOutput()
		if err != nil {
			t.Fatalf("conch %v: %v %s", args, err, out)
		}
		return string(out)
	}
	var inv struct{ Token string }
	json.Unmarshal([]byte(cli("nodes", "invite", "--json")), &inv)

	bad := e2etest.StartNode(t, e2etest.NewHome(t, e2etest.NodeFullConfig), nil, "--gateway", g.Base, "--token", inv.Token, "--name", "wrong-pin", "--ca", other)
	nh := e2etest.NewHome(t, e2etest.NodeFullConfig)
	e2etest.StartNode(t, nh, nil, "--gateway", strings.Replace(g.Base, "https://", "wss://", 1), "--token", inv.Token, "--name", "tls-node", "--ca", cert)
	e2etest.Eventually(t, 15*time.Second, func() string {
		if out := cli("nodes", "list"); !strings.Contains(out, "pending    tls-node") {
			return "no pairing request: " + out
		}
		return ""
	})
	cli("nodes", "approve", "tls-node")
	e2etest.Eventually(t, 15*time.Second, func() string {
		if out := cli("nodes", "list"); !strings.Contains(out, "connected  tls-node") {
			return "not connected: " + out
		}
		return ""
	})
	if out := cli("exec", "--", "echo over-tls"); !strings.Contains(out, "over-tls") {
		t.Fatalf("exec over TLS: %s", out)
	}
	if out := cli("nodes", "list"); strings.Contains(out, "wrong-pin") {
		t.Fatalf("a node pinning another certificate got through: %s", out)
	}
	if !strings.Contains(bad.Output(), "pinned certificate") {
		t.Fatalf("wrong pin not reported: %s", bad.Output())
	}
}

// TestNodeHelloChecks speaks the node side by hand against a real gateway:
// a bad signature or a node id that is not the key's is closed with 4401.
func TestNodeHelloChecks(t *testing.T) {
	t.Parallel()
	g := e2etest.StartNodeGateway(t, e2etest.NewHome(t, e2etest.NodeGatewayConfig), "127.0.0.1:0")
	tok := g.Invite("1h", false)
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	try := func(mutate func(h *apitype.NodeHello, nonce string)) websocket.StatusCode {
		t.Helper()
		return e2etest.HandHello(t, g, tok, pub, key, "hand", mutate)
	}
	if code := try(func(h *apitype.NodeHello, n string) {
		h.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, apitype.NodeHelloMessage(n+"x")))
	}); code != 4401 {
		t.Fatalf("bad signature: close %d", code)
	}
	if code := try(func(h *apitype.NodeHello, _ string) { h.NodeID = apitype.NodeIDOf(other) }); code != 4401 {
		t.Fatalf("node id of another key: close %d", code)
	}
	if code := try(func(*apitype.NodeHello, string) {}); code != 0 {
		t.Fatalf("a good hello was refused: %d", code)
	}
	if st, id := g.NodeStatus("hand"); st != "pending" || id != apitype.NodeIDOf(pub) {
		t.Fatalf("pairing request: %s %s", st, id)
	}
}

// TestNodeTLSCA verifies the gateway against a CA bundle given with --ca
// (the CA signed the gateway's certificate for 127.0.0.1).
func TestNodeTLSCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "conch test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "gateway"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, _ := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile, caFile := filepath.Join(dir, "gw.pem"), filepath.Join(dir, "gw.key"), filepath.Join(dir, "ca.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)

	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	out, err := exec.Command(e2etest.ConchBin, "nodes", "invite", "--home", gh, "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var inv struct{ Token string }
	json.Unmarshal(out, &inv)
	// Without --ca the system roots do not know the test CA.
	bad := e2etest.StartNode(t, e2etest.NewHome(t, e2etest.NodeFullConfig), nil, "--gateway", g.Base, "--token", inv.Token, "--name", "no-ca")
	n := e2etest.StartNode(t, e2etest.NewHome(t, e2etest.NodeFullConfig), nil, "--gateway", g.Base, "--token", inv.Token, "--name", "with-ca", "--ca", caFile)
	e2etest.Eventually(t, 15*time.Second, func() string {
		out, _ := exec.Command(e2etest.ConchBin, "nodes", "list", "--home", gh).CombinedOutput()
		if !strings.Contains(string(out), "pending    with-ca") {
			return "no pairing request over TLS: " + string(out) + n.Output()
		}
		if strings.Contains(string(out), "no-ca") {
			t.Fatalf("a node without the CA got through: %s", out)
		}
		return ""
	})
	// The two nodes dial concurrently: the untrusted one may report after
	// the trusted one is already pending.
	e2etest.Eventually(t, 15*time.Second, func() string {
		if !strings.Contains(bad.Output(), "certificate signed by unknown authority") {
			return "untrusted gateway not reported: " + bad.Output()
		}
		return ""
	})
}
