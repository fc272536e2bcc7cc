// Package supervisor owns one session's process: it is the code behind the
// hidden `conch supervise` subcommand, a small re-exec of the conch binary
// that starts the command in its own process group (and cgroup where the
// machine allows), pumps its output into the session journal, enforces the
// timeout, carries out the kill sequence, records the end state in
// exit.json, and answers a control socket. It outlives the gateway that
// started it, which is what lets sessions survive a gateway restart.
//
// The package also holds the client side used by the engine: the spawn
// handshake (Launch, Spare, Shared), the pool of supervisor processes
// (Pool) and the control-socket client (Call, Subscribe). The vocabulary
// both sides share (the spec, the control messages, the end states, the
// session files and their one writer) is the leaf package proto.
package supervisor
