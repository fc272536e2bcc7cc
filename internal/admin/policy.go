package admin

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/engine"
	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/node/hub"
)

// ErrInvalid marks a request an operator must correct (a missing command,
// an unknown value); adapters map it to their usage error.
var ErrInvalid = errors.New("invalid argument")

// Explain evaluates command for agent (default "main") in cwd (default
// this process's working directory) against home's configuration and
// approvals file as a gateway run would, without running or recording
// anything.
func Explain(home, agent, cwd, command string) (engine.Explanation, error) {
	if strings.TrimSpace(command) == "" {
		return engine.Explanation{}, invalid("command is required")
	}
	if agent == "" {
		agent = "main"
	}
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	return engine.ExplainPolicy(home, agent, cwd, command)
}

// ExecDefaults returns agent's exec defaults in home.
func ExecDefaults(home, agent string) (apitype.ExecDefaults, error) {
	return engine.LoadExecDefaults(home, agent)
}

// SetExecDefaults checks d (host, security and ask among their values in
// any case, a node that resolves to a paired node) and replaces agent's
// exec defaults with it, the node in its canonical form; it returns what
// it saved. A bad value is an error wrapping ErrInvalid.
func SetExecDefaults(home, agent string, d apitype.ExecDefaults) (apitype.ExecDefaults, error) {
	for _, c := range []struct {
		v       string
		allowed []string
	}{{d.Host, append([]string{""}, config.HostValues()...)}, {d.Security, []string{"", "deny", "allowlist", "full"}}, {d.Ask, []string{"", "off", "on-miss", "always"}}} {
		if !slices.Contains(c.allowed, strings.ToLower(c.v)) {
			return d, invalid(fmt.Sprintf("invalid exec default %q", c.v))
		}
	}
	if d.Node != "" {
		n, err := hub.CanonicalBinding(home, d.Node)
		if err != nil {
			return d, invalid("invalid exec default node: " + err.Error())
		}
		d.Node = n
	}
	return d, engine.SaveExecDefaults(home, agent, d, false)
}

// ClearExecDefaults removes agent's exec defaults.
func ClearExecDefaults(home, agent string) error {
	return engine.SaveExecDefaults(home, agent, apitype.ExecDefaults{}, true)
}

// InvalidError is a request an operator must correct; its message is
// meant for them as it is. It matches ErrInvalid.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string        { return e.Msg }
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(msg string) error { return &InvalidError{msg} }
