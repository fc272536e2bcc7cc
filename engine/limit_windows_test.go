package engine

import "errors"

// setDescriptorLimit refuses: Windows has no descriptor limit to lower,
// so the tests of running out of descriptors cannot run there.
func setDescriptorLimit(n int) error {
	return errors.New("no descriptor limit on Windows")
}
