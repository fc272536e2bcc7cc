package admin

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/host/shellenv"
	"github.com/conchsh/conch/internal/session/shim"
	"github.com/conchsh/conch/internal/session/supervisor"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"github.com/conchsh/conch/internal/store/approvals"
	"github.com/conchsh/conch/internal/store/auth"
	"github.com/conchsh/conch/internal/store/ledger"
	"github.com/conchsh/conch/policy"
)

// Finding is one result of `conch doctor` (the wire type is apitype's).
type Finding = apitype.Finding

var interpreterBin = regexp.MustCompile(`^(python|ruby|perl|php|node)\d[\d.]*$`)

var interpreterBins = []string{"ash", "bash", "busybox", "bun", "cmd", "dash", "deno", "fish", "ksh", "lua", "node", "nodejs", "perl", "php", "powershell", "pwsh", "python", "python2", "python3", "pypy", "ruby", "sh", "toybox", "zsh", "awk", "gawk", "mawk", "sed", "jq"}

var riskyTrusted = []string{"/tmp", "/var/tmp", "/private/tmp", "/usr/local/bin", "/opt/homebrew/bin", "/opt/local/bin", "/home/linuxbrew/.linuxbrew/bin"}

// Doctor audits a home: permissions, the approvals file, the policy, the
// containment available, lost sessions and the ledger.
func Doctor(home string) []Finding {
	var out []Finding
	add := func(id, level, format string, args ...any) {
		out = append(out, Finding{ID: id, Level: level, Message: fmt.Sprintf(format, args...)})
	}
	doctorHomeFiles(add, home)
	doctorModes(add, home)
	doctorShim(add)
	doctorPlatform(add)
	// The gateway runs as the home's owner; doctor usually runs as the same user.
	root := doctorEUID() == 0 || homeOwner(home) == 0
	if _, err := auth.ReadOperatorToken(home); err != nil && !errors.Is(err, os.ErrNotExist) {
		add("home.operator_token", "error", "%v (every operator call is refused with 401 until then)", err)
	}
	cfg, err := config.Load(filepath.Join(home, "config.json"))
	if err != nil {
		add("config.invalid", "error", "%v", err)
		cfg = &config.Config{}
	}
	doctorDisk(add, home, cfg)
	f, ferr := approvals.Load(home)
	if ferr != nil {
		add("approvals.unreadable", "error", "%v (host exec is denied)", ferr)
	}
	agents := doctorApprovals(add, cfg, f)
	v := engine.NewPolicyView(home, cfg)
	sandboxed := false
	var limitAgent config.SandboxSettings
	for _, agent := range agents {
		if doctorAgent(add, home, cfg, v, agent, root, ferr == nil, &limitAgent) {
			sandboxed = true
		}
	}
	if abi := sandbox.LandlockABI(); abi > 0 {
		add("sandbox.landlock", "info", "Landlock ABI %d and seccomp are available: the landlock backend (the fallback without bwrap) is usable", abi)
	} else {
		add("sandbox.landlock", "info", "the kernel offers no Landlock: the landlock backend is unavailable")
	}
	doctorSessionLimits(add, cfg, agents)
	if sandboxed {
		doctorLimits(add, limitAgent)
	}
	if !supervisor.CgroupAvailable() {
		add(noCgroup.name, noCgroup.level, "%s", noCgroup.text)
	}
	doctorSessions(add, home)
	doctorNodes(add, home)
	doctorLedger(add, home, cfg)
	return out
}

// doctorHomeFiles checks the modes and owners of the home and its
// secrets.
func doctorHomeFiles(add func(id, level, format string, args ...any), home string) {
	if !modeBits {
		add("home.permissions", "info", "%s", noModeBits)
	}
	if fi, err := os.Stat(home); err == nil && modeBits && fi.Mode().Perm() != 0o700 {
		add("home.permissions", "error", "%s has mode %o, want 0700", home, fi.Mode().Perm())
	}
	for _, f := range homeSecrets(home) {
		p := filepath.Join(home, f)
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			if modeBits && fi.Mode().Perm()&0o077 != 0 {
				add("home.permissions", "error", "%s has mode %o, want 0600", p, fi.Mode().Perm())
			}
			if uid, ok := fileOwner(fi); ok && uid != os.Getuid() {
				add("home.permissions", "error", "%s is owned by uid %d", p, uid)
			}
		}
	}
}

// homeOwner is the uid owning home, or -1.
func homeOwner(home string) int {
	homeInfo, _ := os.Stat(home)
	if homeInfo != nil {
		if uid, ok := fileOwner(homeInfo); ok {
			return uid
		}
	}
	return -1
}

// doctorDisk reports a home exec refuses new sessions in.
func doctorDisk(add func(id, level, format string, args ...any), home string, cfg *config.Config) {
	switch d := engine.CheckHome(home, cfg); {
	case d.Full:
		add("home.disk_full", "error", "the conch home is out of disk space (%s): exec refuses new sessions with disk_full until space is freed", d.Reason)
	case d.Unwritable:
		add("home.unwritable", "error", "the conch home cannot be written (%s): exec refuses new sessions with home_unwritable until a write succeeds again", d.Reason)
	}
}

// doctorApprovals checks the allowlists of the approvals file f (nil:
// unreadable) and returns the agents to audit: main, the configured
// ones, then those the file names.
func doctorApprovals(add func(id, level, format string, args ...any), cfg *config.Config, f *approvals.File) []string {
	agents := []string{"main"}
	for id := range cfg.Agents {
		if id != "main" {
			agents = append(agents, id)
		}
	}
	if f == nil {
		return agents
	}
	for id, a := range f.Agents {
		for i, e := range a.Allowlist {
			switch {
			case strings.TrimSpace(e.Pattern) == "*":
				add("approvals.star", "warn", "agents.%s.allowlist[%d] is \"*\": every resolvable binary is allowed", id, i)
			case !strings.Contains(e.Pattern, "/") && !strings.HasPrefix(e.Pattern, "~"):
				add("approvals.bare_names", "warn", "agents.%s.allowlist[%d] %q has no \"/\" and is ignored", id, i, e.Pattern)
			default:
				if fi, err := os.Stat(e.Pattern); err == nil && fi.Mode().Perm()&0o022 != 0 {
					add("approvals.writable_exe", "warn", "allowlisted %s is group/world-writable", e.Pattern)
				}
			}
		}
		if id != "*" && id != "default" && !contains(agents, id) {
			agents = append(agents, id)
		}
	}
	return agents
}

// doctorAgent audits one agent: where its commands run, its gate and
// policy (fileOK: the approvals file was read), apply_patch and its safe
// bins. It reports whether the agent is sandboxed, and sets *limits to
// its sandbox settings when they carry limits.
func doctorAgent(add func(id, level, format string, args ...any), home string, cfg *config.Config, v engine.PolicyView, agent string, root, fileOK bool, limits *config.SandboxSettings) (sandboxed bool) {
	set := cfg.Exec(agent)
	host, _ := v.ConfiguredHost(agent)
	sb := cfg.SandboxFor(agent)
	switch {
	case host != "" && host != "sandbox":
	case sb.On:
		sandboxed = true
		if sb.MemoryBytes > 0 || sb.Pids > 0 || sb.CPUs > 0 {
			*limits = sb
		}
		doctorSandbox(add, home, agent, set.Workspace, sb)
	case host == "":
		if root {
			add("gateway.root_unsandboxed", "warn", "agent %s: the gateway runs as root with sandbox.mode=off: the agent's commands run as root on this machine without approvals (turn sandboxing on, set tools.exec.host=gateway to gate them, or run conch as an unprivileged user)", agent)
		}
	default:
		add("exec.host_sandbox_no_sandbox", "warn", "agent %s: host=sandbox is configured while sandboxing is off: every exec fails", agent)
	}
	var p engine.Policy
	if fileOK {
		p = v.EffectivePolicy(agent, "true", home, shellenv.DaemonPATH())
	}
	// Ungated: the agent's commands run on this machine with nothing
	// judging them (the same status `policy explain` prints first).
	if g := v.Gate(agent, p); g.Ungated {
		add("exec.ungated", "warn", "commands of agent %s are not gated: %s", agent, g.Reason)
	}
	if fileOK {
		doctorPolicy(add, agent, p, host, root)
	}
	if ap := cfg.ApplyPatch(agent); ap.Enabled && !ap.WorkspaceOnly {
		add("apply_patch.outside_workspace", "warn", "agent %s: apply_patch is enabled with workspaceOnly=false: patches may write anywhere the gateway user can", agent)
	}
	if ap := cfg.ApplyPatch(agent); len(ap.AllowModels) > 0 {
		add("apply_patch.allow_models_ignored", "info", "agent %s: tools.exec.applyPatch.allowModels is set; conch does not see the model and ignores it", agent)
	}
	doctorSafeBins(add, agent, set)
	return sandboxed
}

// doctorPolicy warns of an agent policy p that lets everything run.
func doctorPolicy(add func(id, level, format string, args ...any), agent string, p engine.Policy, host string, root bool) {
	if p.Security == policy.SecurityFull && p.Ask == policy.AskOff && host == "gateway" {
		add("policy.full_off", "warn", "agent %s resolves to security=full with ask=off on the gateway", agent)
		if root {
			add("gateway.root_unsandboxed", "warn", "agent %s: the gateway runs as root and the agent's commands run on it ungated (security=full, ask=off): anything it asks runs as root", agent)
		}
	}
	if p.AskFallback == policy.SecurityFull {
		add("policy.ask_fallback_full", "warn", "agent %s: askFallback=full runs unanswered requests", agent)
	}
}

// doctorSafeBins checks an agent's safe bins and their trusted dirs.
func doctorSafeBins(add func(id, level, format string, args ...any), agent string, set config.ExecSettings) {
	for _, b := range policy.UnprofiledSafeBins(set.SafeBins, nil) {
		if contains(interpreterBins, b) || interpreterBin.MatchString(b) {
			add("exec.safe_bins_interpreter_unprofiled", "warn", "agent %s: safe bin %q is an interpreter without a profile", agent, b)
		} else if _, ok := set.SafeBinProfiles[b]; !ok {
			add("exec.safe_bins_unprofiled", "warn", "agent %s: safe bin %q has no profile and is ignored", agent, b)
		}
	}
	for _, d := range set.SafeBinTrustedDirs {
		if !filepath.IsAbs(d) || contains(riskyTrusted, filepath.Clean(d)) || strings.Contains(d, "/.local/bin") || strings.HasPrefix(d, "~") {
			add("exec.safe_bin_trusted_dirs_risky", "warn", "agent %s: trusted dir %q is risky", agent, d)
		} else if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o022 != 0 {
			add("exec.safe_bin_trusted_dirs_writable", "warn", "agent %s: trusted dir %s is group/world-writable", agent, d)
		}
	}
}

// doctorLimits says which of the sandbox limits l the cgroups here
// enforce.
func doctorLimits(add func(id, level, format string, args ...any), l config.SandboxSettings) {
	var want []proto.Limit
	for _, x := range []proto.Limit{{Key: "memoryBytes", Setting: "sandbox.limits.memoryBytes", Value: float64(l.MemoryBytes)},
		{Key: "pids", Setting: "sandbox.limits.pids", Value: float64(l.Pids)}, {Key: "cpus", Setting: "sandbox.limits.cpus", Value: l.CPUs}} {
		if x.Value > 0 {
			want = append(want, x)
		}
	}
	enforced, warns := supervisor.ProbeLimits(want)
	if len(enforced) > 0 {
		keys := make([]string, 0, len(enforced))
		for k := range enforced {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		add("containment.limits", "info", "sandbox limits are enforced through cgroups: %s", strings.Join(keys, ", "))
	}
	for _, w := range warns {
		add("containment.limits", "warn", "%s", strings.TrimPrefix(w, "Warning: "))
	}
}

// doctorSessions counts the sessions in state lost.
func doctorSessions(add func(id, level, format string, args ...any), home string) {
	entries, _ := os.ReadDir(filepath.Join(home, "sessions"))
	lost := 0
	for _, en := range entries {
		if ex, ok, _ := proto.ReadExit(filepath.Join(home, "sessions", en.Name())); ok && ex.State == proto.StateLost {
			lost++
		}
	}
	if lost > 0 {
		add("sessions.lost", "warn", "%d session(s) in state lost", lost)
	}
}

// doctorNodes counts the node pairing requests waiting.
func doctorNodes(add func(id, level, format string, args ...any), home string) {
	var pending []struct {
		NodeID      string `json:"nodeId"`
		Name        string `json:"name"`
		ExpiresAtMs int64  `json:"expiresAtMs"`
	}
	if fsutil.ReadJSON(filepath.Join(home, "nodes", "pending.json"), &pending) == nil {
		waiting := 0
		for _, p := range pending {
			if p.ExpiresAtMs > time.Now().UnixMilli() {
				waiting++
			}
		}
		if waiting > 0 {
			add("nodes.pending", "info", "%d node pairing request(s) waiting: conch nodes list, conch nodes approve ID", waiting)
		}
	}
}

// doctorLedger checks the ledger's chain, its signing key and where it
// is kept.
func doctorLedger(add func(id, level, format string, args ...any), home string, cfg *config.Config) {
	if rep, err := ledger.Verify(home); err != nil {
		add("ledger.broken", "error", "%v", err)
	} else if !rep.OK {
		add("ledger.broken", "error", "%s", rep.String())
	} else if len(rep.Gaps) > 0 {
		add("ledger.gaps", "warn", "the ledger lost %d records in %d gaps (first at seq %d, %s: %s): conch ledger verify lists them", rep.Dropped, len(rep.Gaps), rep.Gaps[0].Seq, rep.Gaps[0].FirstTS, rep.Gaps[0].Reason)
	}
	if key, err := ledger.LoadKey(home); err == nil {
		add("ledger.key", "info", "the ledger's checkpoints are signed by %s: keep a copy of this public key off this machine and verify with conch ledger verify --pubkey", ledger.FormatPublicKey(key.Public().(ed25519.PublicKey)))
	} else if os.IsNotExist(err) {
		add("ledger.key", "info", "no ledger signing key yet: conch ledger key creates it and prints the public key to keep elsewhere")
	} else {
		add("ledger.key", "error", "the ledger's signing key is unusable (%v): records are written with unsigned checkpoints and conch ledger verify fails until it is restored (removing it makes a new key, a change the next record notes as a gap)", err)
	}
	if cfg.Ledger.Forward == nil {
		add("ledger.forward_off", "info", "the ledger is kept only on this machine: set ledger.forward to send records and signed checkpoints to syslog or journald")
	}
}

// doctorShim says which program runs under every command: conch-shim, or
// conch itself (slower to start), with the fix.
func doctorShim(add func(id, level, format string, args ...any)) {
	if p := shim.Locate(); p.Fast() {
		add("shim", "info", "commands start under %s (%s, protocol %s)", p.Path, p.From, shim.Protocol())
	} else {
		add("shim.missing", "info", "%s", p.Note)
	}
}

// doctorSandbox reports an agent's sandbox: backend and layers, or why it
// is unusable, and an unsafe workspace.
func doctorSandbox(add func(id, level, format string, args ...any), home, agent, workspace string, sb config.SandboxSettings) {
	if r, ok := sandbox.RemoteOf(sb.Backend); ok {
		add("sandbox.layers", "info", "agent %s: %s", agent, r.Describe(sb))
		return
	}
	b, err := sandbox.For(context.Background(), sb)
	if err != nil {
		add("sandbox.unavailable", "error", "agent %s: sandboxing is on but %v: every exec fails with sandbox_unavailable", agent, err)
		return
	}
	r := &sandbox.Run{Settings: sb}
	layers := b.Layers(r)
	add("sandbox.layers", "info", "agent %s: sandbox backend %s, layers %s, workspace access %s, network %s", agent, b.Name(), strings.Join(layers, ","), sb.WorkspaceAccess, sb.Network)
	if g, ok := b.(sandbox.Gapped); ok {
		add("sandbox.weaker", "warn", "agent %s: the %s backend cannot enforce: %s", agent, b.Name(), strings.Join(g.Gaps(r), "; "))
	}
	if b.Name() == "landlock" {
		ipc := "System V IPC and POSIX message queues are refused"
		if !slices.Contains(layers, "ipcns") {
			ipc += " but /proc/sysvipc lists the host's objects (no IPC namespace without root)"
		}
		add("sandbox.weaker", "warn", "agent %s: the landlock backend has no PID, UTS or mount namespace: host processes stay visible in /proc, the workspace's git directories stay writable, %s, and as root the command stays root (install bubblewrap for the full boundary)", agent, ipc)
		if sb.WorkspaceAccess == "rw" {
			add("sandbox.landlock_git", "warn", "agent %s: the landlock backend does not protect repositories: a sandboxed command can write the workspace's .git (config, hooks) and every file your git configuration names there (a core.hooksPath directory, an included file, a core.fsmonitor or filter program), and the host's git runs what it wrote if it runs while the command does. conch puts these paths back when each run ends; use the bwrap backend (or workspaceAccess ro/none) for repositories you run git in on the host", agent)
		}
	}
	if workspace != "" && sb.WorkspaceAccess != "none" {
		if err := sandbox.WorkspaceSafe(home, workspace); err != nil {
			add("sandbox.workspace_unsafe", "error", "agent %s: %v: sandboxed runs fail (sandbox_unavailable)", agent, err)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// doctorSessionLimits says which of the session limits (quotas.session)
// this machine enforces, for each distinct setting among the agents, by
// setting them on a throw-away session cgroup: one info finding with the
// limits in force and the cgroup hierarchy that holds them, and a warning
// per limit the machine cannot enforce.
func doctorSessionLimits(add func(id, level, format string, args ...any), cfg *config.Config, agents []string) {
	seen := map[config.SessionLimitSettings][]string{}
	var order []config.SessionLimitSettings
	for _, a := range agents {
		l := cfg.Quota(a).Session
		if _, ok := seen[l]; !ok {
			order = append(order, l)
		}
		seen[l] = append(seen[l], a)
	}
	for _, l := range order {
		who := "agent " + strings.Join(seen[l], ", ")
		var want []proto.Limit
		for _, x := range []proto.Limit{{Key: "memoryBytes", Setting: "quotas.session.memoryBytes", Value: float64(l.MemoryBytes)},
			{Key: "pids", Setting: "quotas.session.pids", Value: float64(l.Pids)},
			{Key: "cpuWeight", Setting: "quotas.session.cpuWeight", Value: float64(l.CPUWeight)}} {
			if x.Value > 0 {
				want = append(want, x)
			}
		}
		if len(want) == 0 {
			add("containment.session_limits", "warn", "%s: no session limits (quotas.session turns them all off): one command can use all of this machine's memory and processes", who)
			continue
		}
		enforced, warns := supervisor.ProbeLimits(want)
		if len(enforced) > 0 {
			var parts []string
			for _, x := range want {
				if v, ok := enforced[x.Key]; ok {
					parts = append(parts, fmt.Sprintf("%s=%s", x.Key, strconv.FormatFloat(v, 'f', -1, 64)))
				}
			}
			add("containment.session_limits", "info", "%s: session limits are enforced through cgroup %s: %s", who, supervisor.LimitHierarchy(), strings.Join(parts, ", "))
		}
		for _, w := range warns {
			add("containment.session_limits", "warn", "%s: %s", who, strings.TrimSuffix(strings.TrimPrefix(w, "Warning: "), "."))
		}
	}
}
