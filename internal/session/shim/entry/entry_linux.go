package entry

import "github.com/conchsh/conch/internal/host/sandbox/initproc"

// osEntries are the entry points that exist on this OS only: the
// in-sandbox init of the bwrap and Landlock backends.
var osEntries = map[string]func([]string) int{
	"sandbox-init": initproc.InitMain,
}
