//go:build unix

package engine

import "syscall"

// setDescriptorLimit sets this process's descriptor limit, soft and hard,
// to n (its supervisors inherit it).
func setDescriptorLimit(n int) error {
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: uint64(n), Max: uint64(n)})
}
