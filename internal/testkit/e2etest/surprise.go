package e2etest

import (
	"fmt"
)

// LeftoverNote is the sentence a result adds when a command that ended by
// itself left n processes running, which conch stopped.
func LeftoverNote(n int, background bool) string {
	what := "1 background process started by this command was stopped when it ended"
	if n > 1 {
		what = fmt.Sprintf("%d background processes started by this command were stopped when it ended", n)
	}
	if background {
		return what + "; a session lasts as long as its command: run the server in the foreground of the command (without &) to keep it running."
	}
	return what + "; use background:true to keep a server running."
}
