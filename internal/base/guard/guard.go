// Package guard keeps one bad request from taking a conch process down:
// adapters (MCP, the HTTP API, the node link) defer Recover around each
// request or frame handler, which turns a panic into an error for that
// call, logs it with its stack and counts it for /metrics.
package guard

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"sync"
)

var (
	mu     sync.Mutex
	counts = map[string]int64{}
)

// Panic describes a recovered panic.
type Panic struct {
	Adapter string
	Value   any
	Stack   []byte
}

func (p *Panic) Error() string {
	return fmt.Sprintf("internal error in %s handler: %v", p.Adapter, p.Value)
}

// Recovered records a recovered panic value v of adapter: it counts it,
// logs it with the stack of the panicking goroutine (call it from the
// deferred function that called recover) and returns it as an error.
// A nil logger logs through slog's default.
func Recovered(adapter string, log *slog.Logger, v any) *Panic {
	p := &Panic{Adapter: adapter, Value: v, Stack: debug.Stack()}
	mu.Lock()
	counts[adapter]++
	mu.Unlock()
	if log == nil {
		log = slog.Default()
	}
	log.Error("handler panic recovered", "adapter", adapter, "panic", fmt.Sprint(v), "stack", string(p.Stack))
	return p
}

// Count is the number of recovered panics of one adapter.
type Count struct {
	Adapter string
	N       int64
}

// Counts returns the recovered panics per adapter, sorted by adapter.
func Counts() []Count {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Count, 0, len(counts))
	for a, n := range counts {
		out = append(out, Count{a, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Adapter < out[j].Adapter })
	return out
}

// Adapters are the labels /metrics reports, zero included ("nodehost"
// counts in a node process, which has no /metrics: it only logs).
var Adapters = []string{"http", "mcp", "nodehub"}

// Get returns the count of one adapter.
func Get(adapter string) int64 {
	mu.Lock()
	defer mu.Unlock()
	return counts[adapter]
}
