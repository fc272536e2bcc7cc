package apitype

import (
	"regexp"
	"sync"
)

// lazyRE compiles expr on first use: every program that links this
// package (conch-shim too, under every command) would otherwise compile
// it at start-up.
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
