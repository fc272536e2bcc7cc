//go:build !unix

package ledger

// Open flags of lock_unix.go; none here.
const (
	oNoFollow = 0
	oNonBlock = 0
)
