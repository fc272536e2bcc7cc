package unixsock

import (
	"fmt"
	"io/fs"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// On Windows a directory's mode bits say nothing about who may use it
// (os.Stat reports 0777 for every directory); its owner and its access
// control list do, and they are what ownDir checks and makePrivate sets.
// An AF_UNIX socket file (Windows 10 1803 and later) is reached by
// whoever the directory lets through. Not yet run on Windows.

// us is this process's user SID and its token's default owner (an
// elevated administrator's new files belong to Administrators).
var us = sync.OnceValues(func() ([]*windows.SID, error) {
	tok, err := windows.OpenCurrentProcessToken()
	if err != nil {
		return nil, err
	}
	defer tok.Close()
	u, err := tok.GetTokenUser()
	if err != nil {
		return nil, err
	}
	sids := []*windows.SID{u.User.Sid}
	var n uint32
	windows.GetTokenInformation(tok, windows.TokenOwner, nil, 0, &n)
	if n > 0 {
		b := make([]byte, n)
		if windows.GetTokenInformation(tok, windows.TokenOwner, &b[0], n, &n) == nil {
			sids = append(sids, (*tokenOwner)(unsafe.Pointer(&b[0])).Owner)
		}
	}
	return sids, nil
})

// tokenOwner is TOKEN_OWNER (winnt.h), which x/sys/windows lacks.
type tokenOwner struct{ Owner *windows.SID }

func isUs(sid *windows.SID) bool {
	sids, _ := us()
	for _, s := range sids {
		if s.Equals(sid) {
			return true
		}
	}
	return false
}

// ownDir checks that dir belongs to this process's user and that its
// access control list gives nobody else what deny names (see
// dirACLProblem).
func ownDir(dir string, deny fs.FileMode) error {
	sd, err := windows.GetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if !isUs(owner) {
		return fmt.Errorf("socket directory %s is owned by %s, not by this user", dir, owner)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if dacl == nil {
		// A null DACL grants everyone everything.
		return fmt.Errorf("socket directory %s has no access control list: anyone may change it", dir)
	}
	var aces []ace
	for i := uint32(0); i < uint32(dacl.AceCount); i++ {
		var e *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &e); err != nil {
			return fmt.Errorf("socket directory %s: %w", dir, err)
		}
		sid := (*windows.SID)(unsafe.Pointer(&e.SidStart))
		aces = append(aces, ace{allow: e.Header.AceType == windows.ACCESS_ALLOWED_ACE_TYPE, flags: e.Header.AceFlags, mask: uint32(e.Mask), sid: sid.String()})
	}
	return dirACLProblem(dir, aces, trustedSID, deny)
}

func trustedSID(s string) bool {
	if s == sidLocalSystem || s == sidAdministrators {
		return true
	}
	sid, err := windows.StringToSid(s)
	return err == nil && isUs(sid)
}

// makePrivate gives dir a protected access control list (nothing
// inherited) that lets only this user, SYSTEM and Administrators in: the
// Windows form of mode 0700. A socket bound in it inherits that list and
// keeps it when renamed onto its path.
func makePrivate(dir string) error {
	sids, err := us()
	if err != nil {
		return err
	}
	sddl := fmt.Sprintf("D:P(A;OICI;FA;;;%s)(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)", sids[0])
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return err
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return err
	}
	return windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
}

// setMode does nothing more: the socket has the private list of the
// directory it was bound in (makePrivate), which is what every caller
// asks for (0600). Mode bits have no meaning for a Windows socket file.
func setMode(path string, perm fs.FileMode) error { return nil }
