package patch

import (
	"io/fs"
	"os"
	"syscall"
)

// fileOwner returns -1, -1 (a Windows file's owner is a SID, and the
// patch keeps it by rewriting in place) and the file's hard-link count,
// read from the opened file (GetFileInformationByHandle): NTFS has hard
// links, and the workspace check refuses a file that has others. A count
// that cannot be read is taken as "more than one" (the check fails
// closed). Not yet run on Windows.
func fileOwner(open func() (*os.File, error), fi fs.FileInfo) (uid, gid int, links uint64) {
	const unknown = ^uint64(0)
	f, err := open()
	if err != nil {
		return -1, -1, unknown
	}
	defer f.Close()
	var info syscall.ByHandleFileInformation
	if err := syscall.GetFileInformationByHandle(syscall.Handle(f.Fd()), &info); err != nil {
		return -1, -1, unknown
	}
	return -1, -1, uint64(info.NumberOfLinks)
}
