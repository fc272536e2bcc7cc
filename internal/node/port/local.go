package port

import (
	"errors"
	"path/filepath"
	"regexp"
	"time"

	"github.com/conchsh/conch/apitype"
)

// Judgement is a node's own verdict on a command a gateway asks it to
// plan (system.run.prepare), computed by the node's engine under the
// node's policy with the gateway's settings applied (which only
// tighten). The node host turns it into the plan and verdict it replies
// with; the checks are made in the order of the fields and a judgement
// stops at the first that refuses (FileErr, then SecurityDeny).
type Judgement struct {
	// Cwd is the canonical working directory, CwdIdentity its device
	// and inode.
	Cwd         string
	CwdIdentity [2]uint64
	// FileErr is set when the approvals file is unusable.
	FileErr error
	// SecurityDeny: the effective security is deny.
	SecurityDeny bool
	// Own is the node's policy alone, "security=S ask=A (sources)";
	// OwnSecurityDeny says its security is deny, OwnDenies that its
	// evaluation denies the command alone.
	Own                        string
	OwnSecurityDeny, OwnDenies bool
	// Allowlist: the effective security is allowlist.
	Allowlist bool
	// Outcome is the policy's: "run", "prompt" or "deny", with its
	// reason; Pinned is the pinned command text, Persist what
	// allow-always adds to the allowlist.
	Outcome string
	Reason  string
	Pinned  string
	Persist []string
	// Segments are the texts of the analysed segments; Exes the
	// executables they resolved to, with their digests (Unpinned: a
	// segment resolved to none); Script the script operand, if any.
	Segments []string
	Exes     []apitype.NodePlanExe
	Unpinned bool
	Script   *apitype.NodePlanExe
	// ApprovalTimeout is how long the node waits for a decision.
	ApprovalTimeout time.Duration
	// Recheck resolves the command again, as a run is about to: whether
	// the script operand and every segment's executable still resolve as
	// judged.
	Recheck func() (scriptSame, exesSame bool)
}

// LocalRun is a run a node host starts on its own home, under the
// gateway's session id, once its plan is checked (system.run).
type LocalRun struct {
	SessionID string
	Agent     string
	// Command is the command text; Argv what runs (the pinned text as
	// the script of a pinned run: Pinned).
	Command string
	Argv    []string
	Pinned  bool
	Cwd     string
	// Env are the caller's environment overrides as sent, Overrides
	// those this node keeps (shellenv.NodeOverrides), EnvHash their hash
	// as planned.
	Env       map[string]string
	Overrides map[string]string
	EnvHash   string
	PTY       bool
	Stdin     string // "pty", "open" or "closed"
	Timeout   time.Duration
	// RunID names the run in the ledger; ApprovalID is set for an
	// approved run.
	RunID, ApprovalID string
}

var sessionIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// ValidSessionID reports whether id can name a session a gateway starts
// on a node: lower-case letters, digits and dashes, 64 at most.
func ValidSessionID(id string) bool { return sessionIDRE.MatchString(id) }

// ErrSessionIDInUse: the session directory a run reserves exists.
var ErrSessionIDInUse = errors.New("session id in use")

// ErrNoCwd: a judged command's working directory does not resolve to an
// existing directory.
var ErrNoCwd = errors.New("no existing canonical cwd")

// ShellScript returns the inline script of a shell-wrapper argv (the
// gateway sends a command as sh, bash, dash or zsh -c or -lc SCRIPT).
func ShellScript(argv []string) (string, bool) {
	if len(argv) == 3 && (argv[1] == "-lc" || argv[1] == "-c") {
		switch filepath.Base(argv[0]) {
		case "sh", "bash", "dash", "zsh":
			return argv[2], true
		}
	}
	return "", false
}
