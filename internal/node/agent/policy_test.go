package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/host"
	"github.com/conchsh/conch/internal/node/agent"
	"github.com/conchsh/conch/internal/store/approvals"
)

// prepareParams is a system.run.prepare of cmd as the gateway's node
// host plans it (sh -lc, the env overrides' hash), with the gateway's
// resolved security and ask.
func prepareParams(cmd, cwd string, env map[string]string, security, ask string) apitype.NodePrepareParams {
	p := apitype.NodePrepareParams{Command: []string{"/bin/sh", "-lc", cmd}, RawCommand: cmd, Cwd: cwd, AgentID: "main", EnvHash: host.EnvHash(env)}
	p.Tool.Security, p.Tool.Ask = security, ask
	return p
}

// runParams is the system.run of a prepared plan.
func runParams(p apitype.NodePrepareReply, sid string, env map[string]string, approved bool) apitype.NodeRunParams {
	return apitype.NodeRunParams{PlanID: p.PlanID, Command: p.Plan.Argv, RawCommand: p.Plan.RawCommand, Cwd: p.Plan.Cwd, Env: env,
		AgentID: "main", RunID: "run-" + sid, SessionID: sid, Approved: approved, Stream: true, Stdin: "closed"}
}

func prepared(t *testing.T, r apitype.Frame) apitype.NodePrepareReply {
	t.Helper()
	if !r.OK {
		t.Fatalf("prepare refused: %+v", r.Error)
	}
	var p apitype.NodePrepareReply
	if err := json.Unmarshal(r.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// finished collects the output of session sid until its exec.finished.
func (gc *gwConn) finished(t *testing.T, ctx context.Context, sid string) (string, apitype.NodeFinished) {
	t.Helper()
	var out bytes.Buffer
	for {
		select {
		case o := <-gc.output:
			if o.SessionID == sid {
				out.Write(o.Data)
			}
		case f := <-gc.events:
			if f.Event != "exec.finished" {
				continue
			}
			var fin apitype.NodeFinished
			json.Unmarshal(f.Payload, &fin)
			if fin.SessionID != sid {
				continue
			}
			// Output sent before the event is already queued.
			for {
				select {
				case o := <-gc.output:
					if o.SessionID == sid {
						out.Write(o.Data)
					}
					continue
				default:
				}
				break
			}
			return out.String(), fin
		case <-gc.done:
			t.Fatalf("the link ended before %s finished", sid)
		case <-ctx.Done():
			t.Fatalf("%s did not finish", sid)
		}
	}
}

// TestNodePairsAndRuns: the node signs the challenge with the identity it
// keeps (0600), saves the node token of node.paired (node.json, 0600),
// and a run its policy allows streams its output and end.
func TestNodePairsAndRuns(t *testing.T) {
	ctx := testCtx(t)
	g := newGateway(t)
	g.start()
	n := startNode(t, g, `{"tools":{"exec":{"security":"full","ask":"off"}}}`)
	gc := g.conn(ctx)
	if gc.hello.Name != "test-node" || gc.hello.Version != "test" || !strings.Contains(strings.Join(gc.hello.Caps, " "), "system.run") {
		t.Fatalf("hello %+v", gc.hello)
	}
	if tok := <-g.tokens; tok != "cnj_join" {
		t.Fatalf("first connection with token %q, want the join token", tok)
	}
	for _, f := range []string{"node/identity.key", "node/node.json"} {
		fi, err := os.Stat(filepath.Join(n.home, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	wd := t.TempDir()
	p := prepared(t, gc.call(t, ctx, "system.run.prepare", prepareParams("echo hi; exit 3", wd, nil, "full", "off")))
	if p.Verdict.RequiresApproval {
		t.Fatalf("security=full asked for approval: %+v", p.Verdict)
	}
	r := gc.call(t, ctx, "system.run", runParams(p, "s-hi", nil, false))
	if !r.OK {
		t.Fatalf("run refused: %+v", r.Error)
	}
	out, fin := gc.finished(t, ctx, "s-hi")
	if out != "hi\n" || fin.ExitCode == nil || *fin.ExitCode != 3 || fin.Success || fin.Host != "node" {
		t.Fatalf("output %q, end %+v", out, fin)
	}
	// The token the node was given is the one it keeps and uses.
	var st agent.State
	b, _ := os.ReadFile(filepath.Join(n.home, "node", "node.json"))
	if json.Unmarshal(b, &st); st.NodeToken != "cnt_test" || st.NodeID != gc.hello.NodeID {
		t.Fatalf("node.json %s", b)
	}
}

// TestNodePolicyIsAuthoritative: the node's own policy decides; what the
// gateway sends can only tighten it. The members: every combination of
// the node's security and the gateway's, over a command the node does not
// allowlist; a plan that was never prepared, a plan used for another
// command, and an unapproved run of a plan that needs approval are all
// refused, and none of them ever runs the command.
func TestNodePolicyIsAuthoritative(t *testing.T) {
	ctx := testCtx(t)
	levels := []string{"deny", "allowlist", "full"}
	rank := map[string]int{"deny": 0, "allowlist": 1, "full": 2}
	for _, nodeSec := range levels {
		t.Run("node="+nodeSec, func(t *testing.T) {
			g := newGateway(t)
			g.start()
			startNode(t, g, `{"tools":{"exec":{"security":"`+nodeSec+`","ask":"off"}}}`)
			gc := g.conn(ctx)
			wd := t.TempDir()
			marker := filepath.Join(wd, "ran")
			cmd := "touch " + marker
			for _, gwSec := range levels {
				r := gc.call(t, ctx, "system.run.prepare", prepareParams(cmd, wd, nil, gwSec, "off"))
				eff := min(rank[nodeSec], rank[gwSec])
				switch {
				case eff == 0:
					who := "node's policy"
					if rank[nodeSec] != 0 {
						who = "gateway's policy"
					}
					wantError(t, "gateway "+gwSec, r, apitype.NodeRunDisabled, "security=deny", who)
				case eff == 1:
					// touch is on no allowlist; ask=off denies the miss.
					who := "node's policy"
					if rank[nodeSec] != 1 {
						who = "gateway's policy"
					}
					wantError(t, "gateway "+gwSec, r, apitype.NodeRunDenied, "allowlist miss", who)
				default:
					p := prepared(t, r)
					if p.Verdict.RequiresApproval {
						t.Fatalf("full/full asked for approval")
					}
				}
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("a prepare ran the command")
			}

			// A plan id the node never made, and (where the node allows
			// anything) a real plan used for another command: the node
			// runs only what it prepared.
			forged := apitype.NodeRunParams{PlanID: "00000000-0000-4000-8000-000000000000", Command: []string{"/bin/sh", "-lc", cmd}, RawCommand: cmd,
				Cwd: wd, AgentID: "main", RunID: "run-forged", SessionID: "s-forged", Approved: true, Stream: true}
			wantError(t, "an unknown plan", gc.call(t, ctx, "system.run", forged), apitype.NodeRunDenied, "execution plan mismatch")
			if nodeSec == "full" {
				p := prepared(t, gc.call(t, ctx, "system.run.prepare", prepareParams("true", wd, nil, "full", "off")))
				swapped := runParams(p, "s-swapped", nil, true)
				swapped.Command, swapped.RawCommand = []string{"/bin/sh", "-lc", cmd}, cmd
				wantError(t, "a swapped command", gc.call(t, ctx, "system.run", swapped), apitype.NodeRunDenied, "execution plan mismatch")
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the node ran a command it had not prepared")
			}
		})
	}
}

// TestNodeApprovalsAreTheNodes: approvals live in the node's home and are
// enforced by the node. A miss the node wants approved is refused
// unapproved; the gateway reads and replaces the node's approvals file
// (0600, in the node's home, with a base hash that must still match), and
// an allowlist entry put there is what lets the command run unprompted.
func TestNodeApprovalsAreTheNodes(t *testing.T) {
	ctx := testCtx(t)
	g := newGateway(t)
	g.start()
	n := startNode(t, g, `{"tools":{"exec":{"security":"allowlist","ask":"on-miss"}}}`)
	gc := g.conn(ctx)
	wd := t.TempDir()
	marker := filepath.Join(wd, "ran")
	cmd := "touch " + marker

	p := prepared(t, gc.call(t, ctx, "system.run.prepare", prepareParams(cmd, wd, nil, "full", "off")))
	if !p.Verdict.RequiresApproval {
		t.Fatalf("the node's ask=on-miss did not ask (the gateway's ask=off must not loosen it): %+v", p.Verdict)
	}
	wantError(t, "an unapproved run", gc.call(t, ctx, "system.run", runParams(p, "s-unapproved", nil, false)), apitype.NodeRunDenied, "approval required")
	// The refusal used the plan up.
	wantError(t, "the plan again", gc.call(t, ctx, "system.run", runParams(p, "s-again", nil, true)), apitype.NodeRunDenied, "execution plan mismatch")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("an unapproved run ran")
	}

	r := gc.call(t, ctx, "system.execApprovals.get", struct{}{})
	if !r.OK {
		t.Fatalf("get: %+v", r.Error)
	}
	var af apitype.NodeApprovalsFile
	json.Unmarshal(r.Payload, &af)
	if af.Exists || !strings.HasPrefix(af.Path, n.home+string(filepath.Separator)) {
		t.Fatalf("approvals file %+v: want a missing file in the node's home %s", af, n.home)
	}
	touch, err := filepath.EvalSymlinks("/usr/bin/touch")
	if err != nil {
		t.Skip("no /usr/bin/touch")
	}
	file := mustJSON(map[string]any{"version": 1, "agents": map[string]any{"main": map[string]any{"allowlist": []any{map[string]string{"pattern": touch}}}}})
	wantError(t, "a stale base hash", gc.call(t, ctx, "system.execApprovals.set", apitype.NodeApprovalsSet{File: file, BaseHash: "stale"}),
		apitype.NodeApprovalsConflict, "INVALID_REQUEST")
	wantError(t, "a file that does not parse", gc.call(t, ctx, "system.execApprovals.set", apitype.NodeApprovalsSet{File: json.RawMessage(`{"version":7}`), BaseHash: af.Hash}),
		apitype.NodeInvalidRequest)
	r = gc.call(t, ctx, "system.execApprovals.set", apitype.NodeApprovalsSet{File: file, BaseHash: af.Hash})
	if !r.OK {
		t.Fatalf("set: %+v", r.Error)
	}
	fi, err := os.Stat(af.Path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the node's approvals file: %v %v, want mode 0600", fi, err)
	}

	p = prepared(t, gc.call(t, ctx, "system.run.prepare", prepareParams(cmd, wd, nil, "full", "off")))
	if p.Verdict.RequiresApproval {
		t.Fatalf("the node's allowlist entry did not allow %s: %+v", cmd, p.Verdict)
	}
	if r := gc.call(t, ctx, "system.run", runParams(p, "s-allowed", nil, false)); !r.OK {
		t.Fatalf("run: %+v", r.Error)
	}
	if _, fin := gc.finished(t, ctx, "s-allowed"); !fin.Success {
		t.Fatalf("end %+v", fin)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the allowed command did not run")
	}
}

// TestNodePersistsAllowAlways: an approved run whose decision is
// allow-always adds its executable to the node's own allowlist (in the
// node's home, not the gateway's), so the next prepare of the command
// needs no approval; an allow-once decision adds nothing.
func TestNodePersistsAllowAlways(t *testing.T) {
	ctx := testCtx(t)
	g := newGateway(t)
	g.start()
	n := startNode(t, g, `{"tools":{"exec":{"security":"allowlist","ask":"on-miss"}}}`)
	gc := g.conn(ctx)
	wd := t.TempDir()
	for i, decision := range []string{"allow-once", "allow-always"} {
		cmd := "touch " + filepath.Join(wd, decision)
		p := prepared(t, gc.call(t, ctx, "system.run.prepare", prepareParams(cmd, wd, nil, "allowlist", "on-miss")))
		if !p.Verdict.RequiresApproval {
			t.Fatalf("%s: the first run of touch needs no approval (%+v)", decision, p.Verdict)
		}
		rp := runParams(p, "s-"+decision, nil, true)
		rp.ApprovalDecision = decision
		if r := gc.call(t, ctx, "system.run", rp); !r.OK {
			t.Fatalf("%s: %+v", decision, r.Error)
		}
		if _, fin := gc.finished(t, ctx, "s-"+decision); !fin.Success {
			t.Fatalf("%s: %+v", decision, fin)
		}
		again := prepared(t, gc.call(t, ctx, "system.run.prepare", prepareParams(cmd, wd, nil, "allowlist", "on-miss")))
		if want := i == 0; again.Verdict.RequiresApproval != want {
			t.Fatalf("after %s the next prepare requires approval: %v, want %v", decision, again.Verdict.RequiresApproval, want)
		}
	}
	b, err := os.ReadFile(approvals.Path(n.home))
	if err != nil || !strings.Contains(string(b), "touch") {
		t.Fatalf("the node's approvals file: %v\n%s", err, b)
	}
}
