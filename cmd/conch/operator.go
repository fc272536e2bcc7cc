package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/admin"
	"github.com/conchsh/conch/internal/approvals"
	"github.com/conchsh/conch/internal/ledger"
	"github.com/conchsh/conch/internal/nodehub"
	"github.com/conchsh/conch/policy"
)

// Operator commands work on the home's files directly (with the same
// locks the engine uses), so they work whether or not an engine runs.

const (
	exitNotFound  = 3
	exitForbidden = 4
	exitConflict  = 5
)

func homeFlag(fs *flag.FlagSet) *string {
	return fs.String("home", defaultHome(), "conch home (state directory)")
}

func runApprovals(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: conch approvals pending | approve ID [--always] | deny ID | decide ID DECISION")
		return exitUsage
	}
	fs := flag.NewFlagSet("approvals "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := homeFlag(fs)
	always := fs.Bool("always", false, "approve: allow always (persist the executables in the allowlist)")
	asJSON := fs.Bool("json", false, "print JSON")
	baseHash := fs.String("base-hash", "", "set: the hash of the file being replaced (from get)")
	force := fs.Bool("force", false, "set: replace whatever the current file is")
	replace := fs.Bool("replace", false, "import: overwrite instead of merging")
	rf := remoteFlags(fs)
	node := fs.String("node", "", "get, set: the approvals file of this node host, through the gateway")
	sub := args[0]
	// Flags may follow the positional arguments.
	var pos []string
	rest := args[1:]
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return exitUsage
		}
		rest = fs.Args()
		if len(rest) > 0 {
			pos = append(pos, rest[0])
			rest = rest[1:]
		}
	}
	if *node != "" {
		return nodeApprovalsFile(sub, *home, *node, rf, pos, *baseHash, *force, stdout, stderr)
	}
	if rf.gateway != "" {
		c, err := rf.client(*home)
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals: %v\n", err)
			return exitUsage
		}
		return approvalsRemote(c, sub, pos, *always, *asJSON, *baseHash, *force, stdout, stderr)
	}
	switch sub {
	case "get", "set", "import":
		return approvalsFile(sub, *home, pos, *baseHash, *force, *replace, stdout, stderr)
	}
	store, err := approvals.OpenStore(*home)
	if err != nil {
		fmt.Fprintf(stderr, "conch approvals: %v\n", err)
		return exitUnavailable
	}
	switch sub {
	case "pending":
		list, err := store.List(approvals.Pending)
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals: %v\n", err)
			return exitFailed
		}
		if *asJSON {
			json.NewEncoder(stdout).Encode(list)
			return exitOK
		}
		printPending(stdout, list)
		return exitOK
	case "approve", "deny", "decide":
		want := 1
		if sub == "decide" {
			want = 2
		}
		if len(pos) != want {
			fmt.Fprintf(stderr, "usage: conch approvals %s ID%s\n", sub, map[bool]string{true: " DECISION", false: ""}[sub == "decide"])
			return exitUsage
		}
		var d approvals.Decision
		switch sub {
		case "approve":
			d = approvals.AllowOnce
			if *always {
				d = approvals.AllowAlways
			}
		case "deny":
			d = approvals.Deny
		default:
			if d, err = approvals.ParseDecision(pos[1]); err != nil {
				fmt.Fprintf(stderr, "conch approvals: %v\n", err)
				return exitUsage
			}
		}
		r, err := store.Decide(pos[0], d, cliUser())
		var already *approvals.AlreadyResolvedError
		switch {
		case errors.As(err, &already):
			fmt.Fprintf(stderr, "conch approvals: %v\n", err)
			return exitConflict
		case errors.Is(err, approvals.ErrUnknown):
			fmt.Fprintf(stderr, "conch approvals: %v\n", err)
			return exitNotFound
		case err != nil:
			fmt.Fprintf(stderr, "conch approvals: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "Approval %s: %s (session %s).\n", r.Slug, r.Decision, r.SessionID)
		return exitOK
	}
	fmt.Fprintf(stderr, "conch approvals: unknown subcommand %q\n", sub)
	return exitUsage
}

// printPending prints pending approval requests for people.
func printPending(w io.Writer, list []*approvals.Request) {
	if len(list) == 0 {
		fmt.Fprintln(w, "No pending approvals.")
		return
	}
	for _, r := range list {
		left := time.Until(time.UnixMilli(r.ExpiresAtMs)).Round(time.Second)
		fmt.Fprintf(w, "%s  agent %s  session %s  expires in %v\n  command: %s\n  cwd: %s\n  reason: %s\n", r.Slug, r.Agent, r.SessionID, left, r.Command, r.Cwd, r.Reason)
		for _, s := range r.Segments {
			fmt.Fprintf(w, "    %-9s %s (%s)\n", s.Verdict, s.Text, s.Exe)
		}
	}
}

func runPolicy(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "explain" {
		fmt.Fprintln(stderr, "usage: conch policy explain [--agent A] [--cwd DIR] [--json] -- CMD")
		return exitUsage
	}
	fs := flag.NewFlagSet("policy explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := homeFlag(fs)
	agent := fs.String("agent", envOr("CONCH_AGENT", "main"), "agent")
	cwd := fs.String("cwd", "", "working directory (default: current)")
	host := fs.String("host", "gateway", "host (gateway)")
	asJSON := fs.Bool("json", false, "print JSON")
	rf := remoteFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	cmd := strings.Join(fs.Args(), " ")
	if strings.TrimSpace(cmd) == "" {
		fmt.Fprintln(stderr, "conch policy explain: no command (put it after --)")
		return exitUsage
	}
	if *cwd == "" {
		*cwd, _ = os.Getwd()
	}
	if rf.gateway != "" {
		c, err := rf.client(*home)
		if err != nil {
			fmt.Fprintf(stderr, "conch policy explain: %v\n", err)
			return exitUsage
		}
		var out map[string]any
		err = c.Call(context.Background(), "POST", "/v1/policy/explain", nil, map[string]string{"agent": *agent, "host": *host, "cwd": *cwd, "command": cmd}, &out)
		if err != nil {
			fmt.Fprintf(stderr, "conch policy explain: %v\n", err)
			return exitForError(err)
		}
		if *asJSON {
			delete(out, "text")
			json.NewEncoder(stdout).Encode(out)
		} else {
			text, _ := out["text"].(string)
			fmt.Fprint(stdout, text)
		}
		return exitOK
	}
	p, err := admin.Explain(*home, *agent, *cwd, cmd)
	if err != nil {
		fmt.Fprintf(stderr, "conch policy explain: %v\n", err)
		return exitFor(err, exitFailed)
	}
	if *asJSON {
		json.NewEncoder(stdout).Encode(p.JSON())
		return exitOK
	}
	fmt.Fprint(stdout, p.Text(*agent))
	return exitOK
}

func runLedger(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: conch ledger verify [--pubkey KEY|FILE] [--checkpoint SEQ:HASH[:MS:SIG]]… [--allow-gaps] | tail [-n N] [--session ID] [--approval ID] [--agent A] [--json] | key")
		return exitUsage
	}
	fs := flag.NewFlagSet("ledger "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := homeFlag(fs)
	n := fs.Int("n", 20, "tail: records")
	session := fs.String("session", "", "tail: one session")
	approval := fs.String("approval", "", "tail: one approval")
	agent := fs.String("agent", "", "tail: one agent")
	asJSON := fs.Bool("json", false, "print JSON")
	follow := fs.Bool("f", false, "tail: keep printing new records until interrupted")
	pubkey := fs.String("pubkey", "", "verify: the public key (ed25519:… or a file holding it) that must have signed HEAD")
	var checkpoints []string
	fs.Func("checkpoint", "verify: a checkpoint seen earlier (SEQ:HASH[:MS:SIG]) the ledger must still hold; repeatable", func(s string) error {
		checkpoints = append(checkpoints, s)
		return nil
	})
	allowGaps := fs.Bool("allow-gaps", false, "verify: exit 0 for an intact ledger with gap records")
	rf := remoteFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	var vo ledger.VerifyOptions
	if *pubkey != "" {
		text := *pubkey
		if !strings.HasPrefix(text, "ed25519:") {
			b, err := os.ReadFile(text)
			if err != nil {
				fmt.Fprintf(stderr, "conch ledger verify: --pubkey: %v\n", err)
				return exitUsage
			}
			text = string(b)
		}
		k, err := ledger.ParsePublicKey(text)
		if err != nil {
			fmt.Fprintf(stderr, "conch ledger verify: --pubkey: %v\n", err)
			return exitUsage
		}
		vo.PublicKey = k
	}
	for _, c := range checkpoints {
		ck, err := ledger.ParseCheckpoint(c)
		if err != nil {
			fmt.Fprintf(stderr, "conch ledger verify: --checkpoint: %v\n", err)
			return exitUsage
		}
		vo.Checkpoints = append(vo.Checkpoints, ck)
	}
	filter := ledger.Filter{Session: *session, Approval: *approval, Agent: *agent}
	if rf.gateway != "" && (vo.PublicKey != nil || vo.Checkpoints != nil || args[0] == "key") {
		fmt.Fprintln(stderr, "conch ledger: key, --pubkey and --checkpoint work on the ledger's own machine (without --gateway)")
		return exitUsage
	}
	if rf.gateway != "" {
		c, err := rf.client(*home)
		if err != nil {
			fmt.Fprintf(stderr, "conch ledger: %v\n", err)
			return exitUsage
		}
		return ledgerRemote(c, args[0], *n, filter, *follow, *asJSON, *allowGaps, stdout, stderr)
	}
	switch args[0] {
	case "verify":
		rep, err := ledger.VerifyWith(*home, vo)
		if err != nil {
			fmt.Fprintf(stderr, "conch ledger verify: %v\n", err)
			return exitFailed
		}
		return printVerify(rep, *asJSON, *allowGaps, stdout)
	case "key":
		pub, err := ledger.EnsureKey(*home)
		if err != nil {
			fmt.Fprintf(stderr, "conch ledger key: %v\n", err)
			return exitFailed
		}
		fmt.Fprintln(stdout, ledger.FormatPublicKey(pub))
		return exitOK
	case "tail":
		return ledgerTail(func(n int, f ledger.Filter) ([]ledger.Record, error) {
			return ledger.Tail(*home, n, f)
		}, *n, filter, *follow, *asJSON, stdout, stderr)
	}
	fmt.Fprintf(stderr, "conch ledger: unknown subcommand %q\n", args[0])
	return exitUsage
}

// runAgents implements `conch agents defaults NAME [k=v…] [--clear]`
// (policy.md §10).
func runAgents(args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 || args[0] != "defaults" {
		fmt.Fprintln(stderr, "usage: conch agents defaults NAME [host=… security=… ask=… node=…] [--clear]")
		return exitUsage
	}
	fs := flag.NewFlagSet("agents defaults", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := homeFlag(fs)
	clear := fs.Bool("clear", false, "remove the agent's exec defaults")
	name := args[1]
	var kvs []string
	rest := args[2:]
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return exitUsage
		}
		rest = fs.Args()
		if len(rest) > 0 {
			kvs = append(kvs, rest[0])
			rest = rest[1:]
		}
	}
	cur, err := engine.LoadExecDefaults(*home, name)
	if err != nil {
		fmt.Fprintf(stderr, "conch agents defaults: %v\n", err)
		return exitFailed
	}
	show := func(v string) string {
		if v == "" {
			return "(unset)"
		}
		return v
	}
	if *clear {
		if err := engine.SaveExecDefaults(*home, name, engine.ExecDefaults{}, true); err != nil {
			fmt.Fprintf(stderr, "conch agents defaults: %v\n", err)
			return exitFailed
		}
		fmt.Fprintln(stdout, "Exec defaults cleared.")
		return exitOK
	}
	if len(kvs) == 0 {
		fmt.Fprintf(stdout, "Current exec defaults: host=%s, security=%s, ask=%s, node=%s.\n", show(cur.Host), show(cur.Security), show(cur.Ask), show(cur.Node))
		fmt.Fprintln(stdout, "Options: host=sandbox|gateway|node, security=deny|allowlist|full, ask=off|on-miss|always, node=<id>|<name>|<ip>.")
		return exitOK
	}
	var set []string
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			k, v, _ = strings.Cut(kv, ":")
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		lv := strings.ToLower(v)
		switch k {
		case "host":
			if !policyOneOf(lv, "sandbox", "gateway", "node") {
				fmt.Fprintf(stderr, "Unrecognized exec host %q. Valid hosts: sandbox, gateway, node.\n", v)
				return exitUsage
			}
			cur.Host = lv
		case "security":
			if !policy.Security(lv).Valid() {
				fmt.Fprintf(stderr, "Unrecognized exec security %q. Valid: deny, allowlist, full.\n", v)
				return exitUsage
			}
			cur.Security = lv
		case "ask":
			if !policy.Ask(lv).Valid() {
				fmt.Fprintf(stderr, "Unrecognized exec ask %q. Valid: off, on-miss, always.\n", v)
				return exitUsage
			}
			cur.Ask = lv
		case "node":
			if v == "" {
				fmt.Fprintln(stderr, "Exec node requires a value.")
				return exitUsage
			}
			n, err := nodehub.CanonicalBinding(*home, v)
			if err != nil {
				fmt.Fprintf(stderr, "Invalid exec node: %v\n", err)
				return exitUsage
			}
			cur.Node, lv = n, n
		default:
			fmt.Fprintf(stderr, "conch agents defaults: unknown key %q\n", k)
			return exitUsage
		}
		set = append(set, k+"="+lv)
	}
	if err := engine.SaveExecDefaults(*home, name, cur, false); err != nil {
		fmt.Fprintf(stderr, "conch agents defaults: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "Exec defaults set (%s).\n", strings.Join(set, ", "))
	return exitOK
}

func policyOneOf(v string, allowed ...string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := homeFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	fix := fs.Bool("fix", false, "apply the safe fixes (home permissions, empty profiles for unprofiled safe bins), then report")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *fix {
		done, err := admin.DoctorFix(*home)
		for _, d := range done {
			fmt.Fprintf(stderr, "fixed %s\n", d)
		}
		if err != nil {
			fmt.Fprintf(stderr, "conch doctor --fix: %v\n", err)
			return exitFailed
		}
	}
	findings := admin.Doctor(*home)
	bad := false
	for _, f := range findings {
		if f.Level != "info" {
			bad = true
		}
	}
	if *asJSON {
		if findings == nil {
			findings = []admin.Finding{}
		}
		json.NewEncoder(stdout).Encode(findings)
	} else if len(findings) == 0 {
		fmt.Fprintln(stdout, "No findings.")
	} else {
		for _, f := range findings {
			fmt.Fprintf(stdout, "%-5s %s: %s\n", f.Level, f.ID, f.Message)
		}
	}
	if bad {
		return exitFailed
	}
	return exitOK
}

// approvalsFile implements `conch approvals get | set FILE|- | import
// [PATH]` (interfaces.md §4, policy.md §2).
func approvalsFile(sub, home string, pos []string, baseHash string, force, replace bool, stdout, stderr io.Writer) int {
	switch sub {
	case "get":
		f, err := approvals.Load(home)
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals get: %v\n", err)
			return exitFailed
		}
		json.NewEncoder(stdout).Encode(map[string]any{"path": approvals.Path(home), "exists": f.Exists(), "hash": f.Hash(), "file": f})
		return exitOK
	case "set":
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "usage: conch approvals set FILE|- (--base-hash H | --force)")
			return exitUsage
		}
		b, err := readFileOrStdin(pos[0])
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals set: %v\n", err)
			return exitFailed
		}
		nf, err := approvals.Parse(b)
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals set: %v\n", err)
			return exitUsage
		}
		old, _ := approvals.Load(home)
		if force {
			if old != nil {
				baseHash = old.Hash()
			} else if raw, err := os.ReadFile(approvals.Path(home)); err == nil {
				// An unusable file is exactly what --force must replace.
				sum := sha256.Sum256(raw)
				baseHash = hex.EncodeToString(sum[:])
			}
		}
		c, err := admin.SetApprovals(home, nf, baseHash, cliUser(), nil)
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals set: %v\n", err)
			if errors.Is(err, approvals.ErrConflict) {
				return exitConflict
			}
			return exitFailed
		}
		if c.LedgerErr != nil {
			fmt.Fprintf(stderr, "conch approvals set: ledger: %v\n", c.LedgerErr)
		}
		fmt.Fprintf(stdout, "{\"hash\":%q}\n", nf.Hash())
		return exitOK
	case "import":
		src := filepath.Join(os.Getenv("HOME"), ".openclaw", "exec-approvals.json")
		if len(pos) > 0 {
			src = pos[0]
		}
		b, err := os.ReadFile(src)
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals import: %v\n", err)
			return exitNotFound
		}
		in, err := approvals.Parse(b)
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals import: %v\n", err)
			return exitUsage
		}
		added, _, err := admin.ImportApprovals(home, in, replace, cliUser(), nil)
		if err != nil {
			fmt.Fprintf(stderr, "conch approvals import: %v\n", err)
			return exitFailed
		}
		if replace {
			fmt.Fprintf(stdout, "Imported %s (replaced).\n", src)
		} else {
			fmt.Fprintf(stdout, "Imported %s: %d allowlist entries added.\n", src, added)
		}
		return exitOK
	}
	return exitUsage
}

// cliUser names the operator deciding from the CLI.
func cliUser() string {
	user := os.Getenv("USER")
	if user == "" {
		user = fmt.Sprint(os.Getuid())
	}
	return "cli:" + user
}
