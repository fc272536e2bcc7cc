package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/admin"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/internal/store/ledger"
)

// The operator commands that read and change the home's approvals, policy
// and ledger (approvals, policy explain, ledger tail|verify) are written
// once, against an operatorSource: a running gateway's /v1 API when
// --gateway (or CONCH_GATEWAY) names one, with the operator token; else
// the home's files, with the same locks the engine uses. They do not start
// an engine: an audit of the ledger or a fix of the approvals file must
// work when the engine cannot start (an invalid config.json, a broken
// ledger, a home held by an engine that serves no socket).

// operatorSource is where the operator commands read and write.
type operatorSource interface {
	pendingApprovals(ctx context.Context) ([]*approvals.Request, error)
	// decide records a decision; slug names the approval as the source
	// knows it.
	decide(ctx context.Context, id, decision string) (slug, decided, session string, err error)
	// approvalsFile is the approvals file as `approvals get` prints it.
	approvalsFile(ctx context.Context) (json.RawMessage, error)
	// setApprovalsFile replaces the file: optimistically against
	// baseHash, or whatever it is with force. It returns the new hash.
	setApprovalsFile(ctx context.Context, b []byte, baseHash string, force bool) (string, error)
	// explain returns the verdict's text and its JSON form.
	explain(ctx context.Context, agent, host, cwd, command string) (string, any, error)
	ledgerTail(ctx context.Context, n int, f ledger.Filter) ([]ledger.Record, error)
	ledgerVerify(ctx context.Context, vo ledger.VerifyOptions) (ledger.Report, error)
}

// opFlags are the flags of the operator commands.
type opFlags struct {
	home, gateway, token string
}

func addOpFlags(fs *pflag.FlagSet) *opFlags {
	o := &opFlags{}
	fs.StringVar(&o.home, "home", defaultHome(), "conch home, the state directory (env CONCH_HOME)")
	fs.StringVar(&o.gateway, "gateway", os.Getenv("CONCH_GATEWAY"), "gateway URL: use its API instead of the home's files (env CONCH_GATEWAY)")
	fs.StringVar(&o.token, "token", "", "operator token for --gateway (env CONCH_TOKEN; default: HOME/operator.token)")
	return o
}

// client returns a client for --gateway with the operator token.
func (o *opFlags) client() (*client.Client, error) {
	tok := gatewayToken(o.token, o.home)
	if tok == "" {
		return nil, fmt.Errorf("--gateway needs an operator token (--token, CONCH_TOKEN or %s/operator.token)", o.home)
	}
	return client.New(client.Options{Gateway: o.gateway, Token: tok})
}

// source returns the gateway's API for --gateway, else the home's files.
func (o *opFlags) source() (operatorSource, error) {
	if o.gateway == "" {
		return fileSource{home: o.home}, nil
	}
	c, err := o.client()
	if err != nil {
		return nil, codeError{ExitUsage, err}
	}
	return apiSource{c}, nil
}

// codeError is a failure with its exit code.
type codeError struct {
	code int
	err  error
}

func (e codeError) Error() string { return e.err.Error() }
func (e codeError) Unwrap() error { return e.err }

// exitForOp maps an operator command's failure: its own code, else as
// exitFor with otherwise.
func exitForOp(err error, otherwise int) int {
	var ce codeError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitFor(err, otherwise)
}

func remoteCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 30*time.Second)
}

// apiSource is a gateway's /v1 API.
type apiSource struct{ c *client.Client }

func (s apiSource) pendingApprovals(ctx context.Context) ([]*approvals.Request, error) {
	ctx, cancel := remoteCtx(ctx)
	defer cancel()
	var out struct {
		Approvals []*approvals.Request `json:"approvals"`
	}
	err := s.c.Call(ctx, "GET", "/v1/approvals", nil, nil, &out)
	return out.Approvals, err
}

func (s apiSource) decide(ctx context.Context, id, decision string) (string, string, string, error) {
	ctx, cancel := remoteCtx(ctx)
	defer cancel()
	var out struct {
		Decision  string `json:"decision"`
		SessionID string `json:"sessionId"`
	}
	err := s.c.Call(ctx, "POST", "/v1/approvals/"+url.PathEscape(id)+"/decision", nil, map[string]string{"decision": decision}, &out)
	return id, out.Decision, out.SessionID, err
}

func (s apiSource) approvalsFile(ctx context.Context) (json.RawMessage, error) {
	ctx, cancel := remoteCtx(ctx)
	defer cancel()
	var out json.RawMessage
	err := s.c.Call(ctx, "GET", "/v1/approvals-file", nil, nil, &out)
	return out, err
}

func (s apiSource) setApprovalsFile(ctx context.Context, b []byte, baseHash string, force bool) (string, error) {
	ctx, cancel := remoteCtx(ctx)
	defer cancel()
	if force {
		var cur struct {
			Hash string `json:"hash"`
		}
		if err := s.c.Call(ctx, "GET", "/v1/approvals-file", nil, nil, &cur); err != nil {
			return "", err
		}
		baseHash = cur.Hash
	}
	if baseHash == "" {
		return "", codeError{ExitUsage, errors.New("--base-hash (from `conch approvals get`) or --force is required")}
	}
	var out struct {
		Hash string `json:"hash"`
	}
	err := s.c.Call(ctx, "PUT", "/v1/approvals-file", nil, map[string]any{"file": json.RawMessage(b), "baseHash": baseHash}, &out)
	return out.Hash, err
}

func (s apiSource) explain(ctx context.Context, agent, host, cwd, command string) (string, any, error) {
	ctx, cancel := remoteCtx(ctx)
	defer cancel()
	var out map[string]any
	if err := s.c.Call(ctx, "POST", "/v1/policy/explain", nil, map[string]string{"agent": agent, "host": host, "cwd": cwd, "command": command}, &out); err != nil {
		return "", nil, err
	}
	text, _ := out["text"].(string)
	delete(out, "text")
	return text, out, nil
}

func (s apiSource) ledgerTail(ctx context.Context, n int, f ledger.Filter) ([]ledger.Record, error) {
	ctx, cancel := remoteCtx(ctx)
	defer cancel()
	q := url.Values{"limit": {strconv.Itoa(n)}}
	if f.Since > 0 {
		q.Set("since", strconv.FormatInt(f.Since, 10))
	}
	for k, v := range map[string]string{"session": f.Session, "approval": f.Approval, "agent": f.Agent} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out struct {
		Records []ledger.Record `json:"records"`
	}
	err := s.c.Call(ctx, "GET", "/v1/ledger", q, nil, &out)
	return out.Records, err
}

func (s apiSource) ledgerVerify(ctx context.Context, vo ledger.VerifyOptions) (ledger.Report, error) {
	if vo.PublicKey != nil || vo.Checkpoints != nil {
		return ledger.Report{}, codeError{ExitUsage, errors.New("key, --pubkey and --checkpoint work on the ledger's own machine (without --gateway)")}
	}
	ctx, cancel := remoteCtx(ctx)
	defer cancel()
	var rep ledger.Report
	err := s.c.Call(ctx, "POST", "/v1/ledger/verify", nil, map[string]any{}, &rep)
	return rep, err
}

// fileSource is the home's files.
type fileSource struct{ home string }

func (s fileSource) store() (*approvals.Store, error) {
	st, err := approvals.OpenStore(s.home)
	if err != nil {
		return nil, codeError{ExitUnavailable, err}
	}
	return st, nil
}

func (s fileSource) pendingApprovals(context.Context) ([]*approvals.Request, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	list, err := st.List(approvals.Pending)
	if err != nil {
		return nil, codeError{ExitFailed, err}
	}
	return list, nil
}

func (s fileSource) decide(_ context.Context, id, decision string) (string, string, string, error) {
	d, err := approvals.ParseDecision(decision)
	if err != nil {
		return "", "", "", codeError{ExitUsage, err}
	}
	st, err := s.store()
	if err != nil {
		return "", "", "", err
	}
	r, err := st.Decide(id, d, cliUser())
	var already *approvals.AlreadyResolvedError
	switch {
	case errors.Is(err, approvals.ErrDropped), errors.As(err, &already):
		return "", "", "", codeError{ExitConflict, err}
	case errors.Is(err, approvals.ErrUnknown):
		return "", "", "", codeError{ExitNotFound, err}
	case err != nil:
		return "", "", "", codeError{ExitFailed, err}
	}
	return r.Slug, string(r.Decision), r.SessionID, nil
}

func (s fileSource) approvalsFile(context.Context) (json.RawMessage, error) {
	f, err := approvals.Load(s.home)
	if err != nil {
		return nil, codeError{ExitFailed, err}
	}
	b, err := json.Marshal(map[string]any{"path": approvals.Path(s.home), "exists": f.Exists(), "hash": f.Hash(), "file": f})
	return b, err
}

func (s fileSource) setApprovalsFile(_ context.Context, b []byte, baseHash string, force bool) (string, error) {
	nf, err := approvals.Parse(b)
	if err != nil {
		return "", codeError{ExitUsage, err}
	}
	old, _ := approvals.Load(s.home)
	if force {
		if old != nil {
			baseHash = old.Hash()
		} else if raw, err := os.ReadFile(approvals.Path(s.home)); err == nil {
			// An unusable file is exactly what --force must replace.
			sum := sha256.Sum256(raw)
			baseHash = hex.EncodeToString(sum[:])
		}
	}
	c, err := admin.SetApprovals(s.home, nf, baseHash, cliUser(), nil)
	if err != nil {
		if errors.Is(err, approvals.ErrConflict) {
			return "", codeError{ExitConflict, err}
		}
		return "", codeError{ExitFailed, err}
	}
	if c.LedgerErr != nil {
		fmt.Fprintf(os.Stderr, "conch approvals set: ledger: %v\n", c.LedgerErr)
	}
	return c.Hash(), nil
}

func (s fileSource) explain(_ context.Context, agent, _, cwd, command string) (string, any, error) {
	p, err := admin.Explain(s.home, agent, cwd, command)
	if err != nil {
		return "", nil, codeError{exitFor(err, ExitFailed), err}
	}
	return p.Text(agent), p.JSON(), nil
}

func (s fileSource) ledgerTail(_ context.Context, n int, f ledger.Filter) ([]ledger.Record, error) {
	return ledger.Tail(s.home, n, f)
}

func (s fileSource) ledgerVerify(_ context.Context, vo ledger.VerifyOptions) (ledger.Report, error) {
	rep, err := ledger.VerifyWith(s.home, vo)
	if err != nil {
		return rep, codeError{ExitFailed, err}
	}
	return rep, nil
}
