package sandbox

import llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"

// LandlockABI returns the kernel's Landlock ABI version (0: none).
func LandlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}
