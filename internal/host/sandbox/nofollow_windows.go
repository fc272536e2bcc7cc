package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// errReparsePoint refuses a path that is a symbolic link or another
// reparse point (a junction): the Windows form of ELOOP from O_NOFOLLOW.
var errReparsePoint = errors.New("is a reparse point (symbolic link or junction)")

// openNoFollow opens p for reading (flag os.O_RDONLY) or creates it
// (os.O_WRONLY|os.O_CREATE|os.O_EXCL), failing when p itself is a
// symbolic link or junction: the reparse point is opened itself
// (FILE_FLAG_OPEN_REPARSE_POINT) and refused. Not yet run on Windows.
func openNoFollow(p string, flag int, perm fs.FileMode) (*os.File, error) {
	access, disp := uint32(windows.GENERIC_READ), uint32(windows.OPEN_EXISTING)
	switch flag {
	case os.O_RDONLY:
	case os.O_WRONLY | os.O_CREATE | os.O_EXCL:
		access, disp = windows.GENERIC_WRITE, windows.CREATE_NEW
	default:
		return nil, &fs.PathError{Op: "open", Path: p, Err: fmt.Errorf("flags %#x not supported here", flag)}
	}
	name, err := windows.UTF16PtrFromString(p)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	h, err := windows.CreateFile(name, access, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, disp,
		windows.FILE_ATTRIBUTE_NORMAL|windows.FILE_FLAG_OPEN_REPARSE_POINT|windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		windows.CloseHandle(h)
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	if info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0 {
		windows.CloseHandle(h)
		return nil, &fs.PathError{Op: "open", Path: p, Err: errReparsePoint}
	}
	return os.NewFile(uintptr(h), p), nil
}

// fileOwner is not known: Windows files have an owner SID, not a uid,
// and conch never runs commands as another Windows user.
func fileOwner(fi fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }
