package engine

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// mountedReadOnly reports whether st is a file system mounted read-only.
func mountedReadOnly(st *syscall.Statfs_t) bool { return st.Flags&unix.ST_RDONLY != 0 }
