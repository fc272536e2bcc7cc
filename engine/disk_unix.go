//go:build unix

package engine

import "syscall"

// statFS measures the file system of path (statfs(2)).
func statFS(path string) (fsInfo, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return fsInfo{}, err
	}
	return fsInfo{
		freeBytes: int64(st.Bavail) * int64(st.Bsize), totalBytes: int64(st.Blocks) * int64(st.Bsize),
		inodes: int64(st.Files), freeInodes: int64(st.Ffree), readOnly: mountedReadOnly(&st),
	}, nil
}
