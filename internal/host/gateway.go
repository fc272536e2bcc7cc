package host

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/host/shellenv"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
)

func init() { Register("gateway", func(d Deps) Host { return &gateway{d: d} }) }

// gateway runs commands on the machine of the daemon, under a local
// supervisor, with the daemon's sanitised environment and the login
// shell's PATH.
type gateway struct{ d Deps }

func (g *gateway) Name() string { return "gateway" }

func (g *gateway) Plan(ctx context.Context, req Request, pl *Plan) *apitype.Error {
	p := req.Params
	pl.Gate = GatePolicy
	if pl.HostReason != "" {
		pl.Gate = GateNone // elevated full, or sandboxing off
	}
	// Workdir: the default workspace, or the user's home when it is
	// gone; a relative workdir is under the default.
	def := req.Workspace
	if !isDir(def) {
		def, _ = os.UserHomeDir()
	}
	pl.Cwd = def
	if p.Workdir != "" {
		w, tilde := ExpandTilde(p.Workdir)
		if !tilde {
			w = workdirUnder(def, w)
		}
		if isDir(w) {
			pl.Cwd = filepath.Clean(w)
		} else {
			pl.Warnings = append(pl.Warnings, fmt.Sprintf("Warning: workdir %q is unavailable; using %q.", p.Workdir, def))
		}
	}

	if msg := shellenv.Validate(p.Env); msg != "" {
		return apitype.Errorf(apitype.CodeSecurity, "%s", msg)
	}
	spec := EnvSpec{Base: InheritedBase(), Layers: []map[string]string{pl.Set.NonInteractiveEnv, p.Env},
		PathPrepend: pl.Set.PathPrepend, PTY: pl.PTY}
	// Login-shell PATH: merged in front of the daemon's, if known in
	// time.
	if g.d.LoginPATH != nil {
		lp, known, waited := g.d.LoginPATH(pl.Window)
		pl.LoginWait = waited
		if known {
			spec.LoginPATH = lp
		} else {
			pl.Warnings = append(pl.Warnings, LoginNotKnown)
		}
	}
	pl.EnvKeys = SortedKeys(p.Env)
	pl.EnvHash = EnvHash(p.Env)
	pl.Env = spec.Build()
	pl.Argv = ShellArgv(p.Command)
	return nil
}

func (g *gateway) Start(ctx context.Context, pl *Plan, spec proto.Spec, run Run) (*proto.Handle, error) {
	return g.d.Launch(ctx, spec)
}

// LoginNotKnown is the warning of a gateway run that started before the
// login-shell PATH was known.
const LoginNotKnown = "Warning: the login-shell PATH is not known yet (its probe is still running); this command ran with conch's own PATH. Later commands get the login-shell PATH."

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// posixShells are the shells that read the commands conch passes (and
// the policy gate judges, parsing them as bash) the way bash does.
var posixShells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ksh93": true,
	"mksh": true, "lksh": true, "pdksh": true, "oksh": true, "ash": true, "yash": true, "posh": true, "busybox": true}

// ShellPath picks the gateway shell: $SHELL when it is a POSIX shell;
// otherwise (fish, csh, tcsh, nu, …: under tcsh the word "a\" ; cmd ; "\"
// that bash reads as one argument ran cmd) bash, else sh, else /bin/sh;
// unset means sh from PATH, else /bin/sh.
func ShellPath() string {
	sh := os.Getenv("SHELL")
	if sh != "" && !posixShells[filepath.Base(sh)] {
		for _, alt := range []string{"bash", "sh"} {
			if p, err := exec.LookPath(alt); err == nil {
				return p
			}
		}
		return "/bin/sh"
	}
	if sh != "" {
		return sh
	}
	if p, err := exec.LookPath("sh"); err == nil {
		return p
	}
	return "/bin/sh"
}
