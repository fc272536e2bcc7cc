package unixsock

import (
	"fmt"
	"io/fs"
)

// ace is one entry of a Windows access control list, as dirACLProblem
// judges it: whether it allows (else denies) access, its flags and
// access mask, and the SID it names in string form.
type ace struct {
	allow bool
	flags uint8
	mask  uint32
	sid   string
}

// Bits of a Windows access mask and of an ACE's flags (winnt.h).
const (
	aceInheritOnly = 0x08

	fileListDirectory   = 0x00000001
	fileAddFile         = 0x00000002
	fileAddSubdirectory = 0x00000004
	fileTraverse        = 0x00000020
	fileDeleteChild     = 0x00000040
	accessDelete        = 0x00010000
	writeDAC            = 0x00040000
	writeOwner          = 0x00080000
	genericAll          = 0x10000000
	genericExecute      = 0x20000000
	genericWrite        = 0x40000000
	genericRead         = 0x80000000

	// maskChange is what lets a SID put its own socket in a directory,
	// or replace or remove ours: the Windows meaning of group or other
	// write permission.
	maskChange = fileAddFile | fileAddSubdirectory | fileDeleteChild | accessDelete | writeDAC | writeOwner | genericAll | genericWrite
	// maskReach adds what lets a SID reach a socket in the directory:
	// the meaning of any group or other permission.
	maskReach = maskChange | fileListDirectory | fileTraverse | genericRead | genericExecute
)

// dirACLProblem is the Windows form of the mode check of a socket's
// directory: an entry of its access control list that gives a SID other
// than the trusted ones (this user, and the accounts that can take any
// file anyway: SYSTEM, Administrators) what deny forbids to group and
// others: 0o022, the right to change the directory; 0o077, any access.
// Entries that only pass on to children (inherit-only) and entries that
// deny are no grant.
func dirACLProblem(dir string, aces []ace, trusted func(sid string) bool, deny fs.FileMode) error {
	mask := uint32(maskChange)
	if deny&0o055 != 0 {
		mask = maskReach
	}
	for _, a := range aces {
		if !a.allow || a.flags&aceInheritOnly != 0 || a.mask&mask == 0 || trusted(a.sid) {
			continue
		}
		return fmt.Errorf("socket directory %s gives %s access %#x: others may enter or change it", dir, a.sid, a.mask)
	}
	return nil
}

// Well-known SIDs trusted like root is on Unix.
const (
	sidLocalSystem    = "S-1-5-18"
	sidAdministrators = "S-1-5-32-544"
)
