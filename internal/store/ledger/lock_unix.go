//go:build unix

package ledger

import "syscall"

// Open flags that keep the ledger off what someone who can write its directory may put
// there instead of a file: O_NOFOLLOW (a symlink would have the gateway, perhaps root,
// write anywhere) and O_NONBLOCK (a FIFO would block the open forever).
const (
	oNoFollow = syscall.O_NOFOLLOW
	oNonBlock = syscall.O_NONBLOCK
)
