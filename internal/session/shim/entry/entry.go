// Package entry is the program of conch-shim: the entry points that run
// under every command (`supervise`, `sandbox-init`) and the protocol
// handshake. cmd/conch-shim is nothing but this; cmd/conch dispatches
// to it too, so a conch without a shim beside it re-executes itself for
// the same jobs (package shim).
//
// Its dependency closure is kept small on purpose (the committed list in
// cmd/conch-shim/deps.txt, checked by internal/testkit/archtest): no network
// protocol, no Kubernetes, no exporter.
package entry

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/conchsh/conch/internal/session/shim"
	"github.com/conchsh/conch/internal/session/supervisor"
)

// Main runs args (the program's arguments, without its name) when they
// name one of the shim's entry points and returns the exit code and true;
// otherwise it returns false and the caller goes on with its own
// commands.
//
//	supervise ARGS                  a session's supervisor (supervisor.Main); refused
//	                                when $CONCH_SHIM_PROTOCOL names another protocol
//	sandbox-init ARGS               a sandbox's init (initproc.InitMain; Linux only)
//	handshake N                     print the protocol; exit 0 when it is N, 3 if not
func Main(args []string) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "supervise":
		if v, found := os.LookupEnv(shim.ProtocolEnv); found {
			os.Unsetenv(shim.ProtocolEnv) // not for the commands
			if v != shim.Protocol() {
				return refuse(v), true
			}
		}
		return supervisor.Main(args[1:]), true
	case "handshake":
		fmt.Println(shim.Answer())
		if len(args) != 2 || args[1] != shim.Protocol() {
			return 3, true
		}
		return 0, true
	}
	if f, found := osEntries[args[0]]; found {
		return f(args[1:]), true
	}
	return 0, false
}

// refuse ends a supervisor started by a conch of protocol theirs: the
// reason goes to stderr and, when the engine's ready pipe is there
// (reportReady), as a failed ready report whose code the engine maps to
// shim.ErrSkew.
func refuse(theirs string) int {
	self, _ := os.Executable()
	err := &shim.SkewError{Path: self, Theirs: shim.Protocol(), Ours: theirs}
	msg := fmt.Sprintf("conch started %s with protocol %s; it speaks %s: install conch and %s from one version (go install ./cmd/...)", self, theirs, shim.Protocol(), shim.Name)
	fmt.Fprintln(os.Stderr, msg)
	line, _ := json.Marshal(map[string]any{"ok": false, "error": err.Error(), "code": supervisor.CodeProtocolSkew})
	reportReady(append(line, '\n'))
	return 2
}
