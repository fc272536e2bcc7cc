package engine

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/conchsh/conch/internal/base/fsutil"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host"
	"github.com/conchsh/conch/internal/host/shellenv"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/internal/store/ledger"
	"github.com/conchsh/conch/policy"
)

// Policy is the effective policy of one agent for one call,
// with where each value came from, for explain.
type Policy struct {
	Security        policy.Security
	Ask             policy.Ask
	AskFallback     policy.Security
	SecuritySources string // e.g. "config allowlist, file —"
	AskSources      string
	Allowlist       []policy.AllowEntry
	// FileErr is set when the approvals file is unusable: host exec is
	// then denied.
	FileErr error
	Request policy.Request
	// rules maps an allowlist entry's source label to the entry, for the
	// lastUsed bookkeeping.
	rules map[string]approvals.Rule
}

// Header is the first line of `conch policy explain`.
func (p Policy) Header(agent, host string) string {
	return fmt.Sprintf("agent %s · host %s · security %s (%s) · ask %s (%s) · askFallback %s",
		agent, host, p.Security, p.SecuritySources, p.Ask, p.AskSources, p.AskFallback)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// EffectivePolicy resolves security, ask and askFallback for agent from
// the agent's exec defaults, the configuration, the per-call request
// (which may only tighten) and the approvals file (stricter wins), and
// prepares the policy request for command in cwd with the exec PATH.
func (e *Engine) EffectivePolicy(agent, reqSecurity, reqAsk, command, cwd, path string) Policy {
	set := e.conf().Exec(agent)
	defs := e.execDefaults(agent)
	var p Policy
	f, ferr := approvals.Load(e.home)
	var res approvals.Resolved
	if ferr == nil {
		res = approvals.Resolve(f, agent)
	} else {
		p.FileErr = ferr
	}

	// Configured values: exec defaults > agent config > global config > built-in.
	confSec := firstNonEmpty(defs.Security, set.Security, "allowlist")
	confAsk := firstNonEmpty(defs.Ask, set.Ask, res.Ask.Value, "on-miss")
	// Per call: a request may only tighten.
	toolSec := policy.Security(confSec)
	if reqSecurity != "" {
		toolSec = policy.Min(toolSec, policy.Security(reqSecurity))
	}
	toolAsk := policy.Ask(confAsk)
	if reqAsk != "" {
		toolAsk = policy.Max(toolAsk, policy.Ask(reqAsk))
	}
	// Approvals-file merge: the stricter of tool and file wins.
	p.Security = toolSec
	if res.Security.Value != "" {
		p.Security = policy.Min(toolSec, policy.Security(res.Security.Value))
	}
	p.Ask = toolAsk
	if res.Ask.Value != "" {
		p.Ask = policy.Max(toolAsk, policy.Ask(res.Ask.Value))
	}
	switch tf, ff := set.AskFallback, res.AskFallback.Value; {
	case tf != "" && ff != "":
		p.AskFallback = policy.Min(policy.Security(tf), policy.Security(ff))
	case tf != "":
		p.AskFallback = policy.Security(tf)
	case ff != "":
		p.AskFallback = policy.Security(ff)
	default:
		p.AskFallback = policy.SecurityDeny
	}
	p.SecuritySources = fmt.Sprintf("config %s, file %s", confSec, orDash(res.Security.Value))
	p.AskSources = fmt.Sprintf("config %s, file %s", confAsk, orDash(res.Ask.Value))
	p.rules = map[string]approvals.Rule{}
	for _, r := range res.Allowlist {
		p.Allowlist = append(p.Allowlist, policy.AllowEntry{Pattern: r.Pattern, Source: r.Source})
		p.rules[r.Source] = r
	}
	home, _ := os.UserHomeDir()
	profiles := map[string]policy.Profile{}
	for name, raw := range set.SafeBinProfiles {
		var pr policy.Profile
		if json.Unmarshal(raw, &pr) == nil {
			profiles[name] = pr
		}
	}
	p.Request = policy.Request{
		Command: command, Security: p.Security, Ask: p.Ask, Host: "gateway", Allowlist: p.Allowlist,
		SafeBins: set.SafeBins, TrustedDirs: set.SafeBinTrustedDirs, Profiles: profiles,
		StrictInlineEval: set.StrictInlineEval, Shell: shellLanguage,
		// macOS and Windows file systems fold case; Linux ones do not.
		Env: policy.Env{PATH: path, Cwd: cwd, Home: home, FoldCase: runtime.GOOS == "darwin" || runtime.GOOS == "windows",
			WindowsPaths: runtime.GOOS == "windows"},
	}
	return p
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return strings.ToLower(s)
		}
	}
	return ""
}

// gateResult is what the policy gate decided for a host run.
type gateResult struct {
	run       bool           // run now
	result    apitype.Result // otherwise: the result to return
	requestID string
	pinned    bool
	decision  policy.Decision
	eff       Policy
}

// gate applies the policy gate to a gateway run, after the script
// preflight and before the timeout and the spawn.
func (e *Engine) gate(agent string, p apitype.ExecParams, pl *plan) gateResult {
	eff := e.EffectivePolicy(agent, p.Security, p.Ask, pl.Command, pl.Cwd, envValue(pl.Env, "PATH"))
	eff.Request.Terminal = pl.PTY
	g := gateResult{requestID: newUUID(), eff: eff}
	deny := func(reason string) gateResult {
		g.result = execError(apitype.Errorf("denied", "%s", reason))
		return g
	}
	if eff.FileErr != nil {
		e.ledgerEvaluate(agent, g.requestID, pl, eff, policy.Decision{Outcome: policy.OutcomeDeny}, "approvals file unreadable")
		return deny("exec denied: " + eff.FileErr.Error())
	}
	if eff.Security == policy.SecurityDeny {
		e.ledgerEvaluate(agent, g.requestID, pl, eff, policy.Decision{Outcome: policy.OutcomeDeny}, "security=deny")
		return deny(fmt.Sprintf("exec denied: host=%s security=deny", pl.Host))
	}
	d := policy.Evaluate(eff.Request)
	g.decision = d
	e.ledgerEvaluate(agent, g.requestID, pl, eff, d, "")
	pl.Warnings = append(pl.Warnings, d.Warnings...)
	switch d.Outcome {
	case policy.OutcomeRun:
		if d.Pinned != "" && eff.Security == policy.SecurityAllowlist {
			pl.Argv = []string{pl.Argv[0], pl.Argv[1], d.Pinned}
			g.pinned = true
		}
		e.markUsed(pl.Command, d, eff)
		g.run = true
		return g
	case policy.OutcomeDeny:
		return deny(d.Reason)
	}
	g.result = e.requestApproval(agent, p, pl, g)
	return g
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// markUsed records allowlist hits (lastUsedAt & co) off the caller's path.
func (e *Engine) markUsed(command string, d policy.Decision, eff Policy) {
	var uses []approvals.Use
	now := time.Now()
	walkSegments(d.Analysis.Parts, func(s policy.Segment) {
		if s.Verdict != policy.VerdictAllowlist {
			return
		}
		r, ok := eff.rules[s.Rule]
		if !ok {
			return
		}
		uses = append(uses, approvals.Use{Owner: r.Owner, ID: r.ID, Pattern: r.Pattern, Command: command, ResolvedPath: s.Exe, At: now})
	})
	if len(uses) == 0 {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := approvals.MarkUsed(e.home, uses); err != nil {
			e.log.Debug("mark allowlist use", "err", err)
		}
	}()
}

// walkSegments calls fn for every segment, inner shell-wrapper segments
// included.
func walkSegments(parts []policy.Part, fn func(policy.Segment)) {
	for _, p := range parts {
		for _, s := range p.Segments {
			fn(s)
			walkSegments(s.Inner, fn)
		}
	}
}

// newUUID returns a random UUID v4.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// fileSHA256 hashes a file's content; "" when it cannot be read. Results
// are cached by path, size and modification time (for the ledger and
// requests; re-checks before an approved spawn use hashFile).
func fileSHA256(path string) string {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	key := fmt.Sprintf("%s|%d|%d", path, fi.Size(), fi.ModTime().UnixNano())
	shaCache.Lock()
	if v, ok := shaCache.m[key]; ok {
		shaCache.Unlock()
		return v
	}
	shaCache.Unlock()
	sum := hashFile(path)
	if sum == "" {
		return ""
	}
	shaCache.Lock()
	if len(shaCache.m) > 4096 {
		shaCache.m = map[string]string{}
	}
	shaCache.m[key] = sum
	shaCache.Unlock()
	return sum
}

// hashFile hashes a file's content without the cache; "" on error.
func hashFile(path string) string { return fsutil.HashFile(path) }

var shaCache = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

func dirIdentity(path string) *approvals.FileID {
	dev, ino, ok := fsutil.Identity(path)
	if !ok {
		return nil
	}
	return &approvals.FileID{Device: dev, Inode: ino}
}

// envHash hashes the request's env overrides (keys and values) so the
// ledger and approvals can bind them without storing values.
func envHash(env map[string]string) string { return host.EnvHash(env) }

type execDefaultsFile struct {
	Agents map[string]apitype.ExecDefaults `json:"agents"`
}

func execDefaultsPath(home string) string { return filepath.Join(home, "state", "exec-defaults.json") }

func (e *Engine) execDefaults(agent string) apitype.ExecDefaults {
	d, _ := LoadExecDefaults(e.home, agent)
	return d
}

// LoadExecDefaults reads agent's exec defaults from home.
func LoadExecDefaults(home, agent string) (apitype.ExecDefaults, error) {
	var f execDefaultsFile
	b, err := os.ReadFile(execDefaultsPath(home))
	if errors.Is(err, os.ErrNotExist) {
		return apitype.ExecDefaults{}, nil
	}
	if err != nil {
		return apitype.ExecDefaults{}, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return apitype.ExecDefaults{}, fmt.Errorf("exec-defaults.json: %w", err)
	}
	return f.Agents[agent], nil
}

// SaveExecDefaults replaces agent's exec defaults (clear: remove them).
func SaveExecDefaults(home, agent string, d apitype.ExecDefaults, clear bool) error {
	var f execDefaultsFile
	if b, err := os.ReadFile(execDefaultsPath(home)); err == nil {
		json.Unmarshal(b, &f)
	}
	if f.Agents == nil {
		f.Agents = map[string]apitype.ExecDefaults{}
	}
	if clear {
		delete(f.Agents, agent)
	} else {
		f.Agents[agent] = d
	}
	if err := os.MkdirAll(filepath.Dir(execDefaultsPath(home)), 0o700); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	return fsutil.WriteFile(execDefaultsPath(home), append(b, '\n'), 0o600)
}

// ledgerSegments flattens a decision's segments for the ledger.
func ledgerSegments(d policy.Decision) []ledger.Segment {
	var out []ledger.Segment
	walkSegments(d.Analysis.Parts, func(s policy.Segment) {
		out = append(out, ledger.Segment{Text: s.Text, Exe: s.Exe, RealPath: s.RealPath, SHA256: fileSHA256(s.RealPath), Verdict: s.Verdict, Rule: s.Rule})
	})
	return out
}

func (e *Engine) ledgerEvaluate(agent, requestID string, pl *plan, eff Policy, d policy.Decision, reason string) {
	analysis := "ok"
	if reason != "" {
		analysis = reason
	} else if !d.Analysis.OK {
		analysis = d.Analysis.Reason
	}
	e.appendLedger(ledger.Record{Type: ledger.TypeEvaluate, Agent: agent, Fields: ledger.Evaluate{
		RequestID: requestID, Host: pl.Host, Command: pl.Command, Cwd: pl.Cwd, EnvKeys: nonNil(pl.EnvKeys),
		EnvHash: pl.EnvHash, Security: string(eff.Security), Ask: string(eff.Ask), AskFallback: string(eff.AskFallback),
		Analysis: analysis, Segments: ledgerSegments(d), Outcome: d.Outcome,
	}}, true)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Explanation is what `conch policy explain` prints: the effective policy
// and the decision, computed without running or recording anything.
type Explanation struct {
	Policy   Policy
	Decision policy.Decision
	// Gate says whether the gate judges the agent's commands at all.
	Gate apitype.GateStatus
}

// ExplainPolicy evaluates command for agent in cwd against the home's
// configuration and approvals file, as a gateway run would be.
func ExplainPolicy(home, agent, cwd, command string) (Explanation, error) {
	cfg, err := config.Load(filepath.Join(home, "config.json"))
	if err != nil {
		return Explanation{}, err
	}
	e := &Engine{home: home}
	e.cfgp.Store(cfg)
	path := shellenv.DaemonPATH()
	// The engine's login PATH: cached in the home, else probed now.
	if lp, _, err := shellenv.StartLoginProbe(loginCachePath(home)).Wait(-1); err == nil && lp != "" {
		path = shellenv.MergePATHList(lp, path, string(os.PathListSeparator))
	}
	if pp := cfg.Exec(agent).PathPrepend; len(pp) > 0 {
		path = prependPath(pp, path)
	}
	p := e.EffectivePolicy(agent, "", "", command, cwd, path)
	return Explanation{Policy: p, Decision: policy.Evaluate(p.Request), Gate: e.Gate(agent, p)}, nil
}

// JSON is the --json form of an explanation.
func (x Explanation) JSON() map[string]any {
	analysis := "ok"
	if !x.Decision.Analysis.OK {
		analysis = x.Decision.Analysis.Reason
	}
	var segs []map[string]string
	walkSegments(x.Decision.Analysis.Parts, func(s policy.Segment) {
		segs = append(segs, map[string]string{"text": s.Text, "exe": s.Exe, "realPath": s.RealPath, "verdict": s.Verdict, "rule": s.Rule})
	})
	fileErr := ""
	if x.Policy.FileErr != nil {
		fileErr = x.Policy.FileErr.Error()
	}
	return map[string]any{
		"policy": map[string]any{
			"security": x.Policy.Security, "securitySources": x.Policy.SecuritySources,
			"ask": x.Policy.Ask, "askSources": x.Policy.AskSources, "askFallback": x.Policy.AskFallback,
			"fileError": fileErr,
		},
		"analysis": analysis, "segments": segs, "verdict": x.Decision.Outcome, "reason": x.Decision.Reason,
		"pinned": x.Decision.Pinned, "persist": x.Decision.Persist, "warnings": x.Decision.Warnings,
		"gate": x.Gate,
	}
}

// allowPatterns lists every allowlist pattern of a file as "agent:pattern".
func allowPatterns(f *approvals.File) map[string]bool {
	out := map[string]bool{}
	if f == nil {
		return out
	}
	for id, a := range f.Agents {
		for _, e := range a.Allowlist {
			out[id+":"+e.Pattern] = true
		}
	}
	return out
}

// RecordPolicyChange appends a ledger `policy` record for a change of the
// approvals file from old to new, by whoever changed it.
func RecordPolicyChange(home string, old, new *approvals.File, by string) error {
	cfg, err := config.Load(filepath.Join(home, "config.json"))
	if err != nil {
		cfg = &config.Config{} // the record matters more than its forwarding
	}
	l, err := ledger.Open(home, ledgerOptions(cfg))
	if err != nil {
		return err
	}
	defer l.Close()
	_, err = l.Append(ledger.Record{Type: ledger.TypePolicy, Fields: policyFields(old, new, by)})
	return err
}

func policyFields(old, new *approvals.File, by string) ledger.Policy {
	before, after := allowPatterns(old), allowPatterns(new)
	p := ledger.Policy{File: approvals.FileName, By: by, Added: []string{}, Removed: []string{}}
	if old != nil {
		p.OldHash = old.Hash()
	}
	if new != nil {
		p.NewHash = new.Hash()
	}
	for k := range after {
		if !before[k] {
			p.Added = append(p.Added, k)
		}
	}
	for k := range before {
		if !after[k] {
			p.Removed = append(p.Removed, k)
		}
	}
	sort.Strings(p.Added)
	sort.Strings(p.Removed)
	return p
}
