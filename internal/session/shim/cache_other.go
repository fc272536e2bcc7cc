//go:build !unix

package shim

import "syscall"

func buildAttr() *syscall.SysProcAttr { return nil }

func lowerPriority(int) {}
