package engine

import (
	"syscall"

	"golang.org/x/sys/windows"

	"github.com/conchsh/conch/apitype"
)

// The Windows errors of a write that put the home in a state (see
// writeErrnos): out of space, or not writable. Not yet run on Windows.
func init() {
	for errno, code := range map[windows.Errno]string{
		windows.ERROR_DISK_FULL:        apitype.CodeDiskFull,
		windows.ERROR_HANDLE_DISK_FULL: apitype.CodeDiskFull,
		windows.ERROR_WRITE_PROTECT:    apitype.CodeHomeUnwritable,
		windows.ERROR_ACCESS_DENIED:    apitype.CodeHomeUnwritable,
	} {
		writeErrnos[syscall.Errno(errno)] = code
	}
}

// statFS measures the volume of path (GetDiskFreeSpaceEx, and the
// volume's read-only flag); NTFS has no inode count to run out of. Not
// yet run on Windows.
func statFS(path string) (fsInfo, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return fsInfo{}, err
	}
	var free, total, totalFree uint64
	if err := windows.GetDiskFreeSpaceEx(p, &free, &total, &totalFree); err != nil {
		return fsInfo{}, err
	}
	st := fsInfo{freeBytes: int64(free), totalBytes: int64(total)}
	var root [windows.MAX_PATH + 1]uint16
	if windows.GetVolumePathName(p, &root[0], uint32(len(root))) == nil {
		var flags uint32
		if windows.GetVolumeInformation(&root[0], nil, 0, nil, nil, &flags, nil, 0) == nil {
			st.readOnly = flags&windows.FILE_READ_ONLY_VOLUME != 0
		}
	}
	return st, nil
}
