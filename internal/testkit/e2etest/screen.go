package e2etest

import (
	"time"
)

// Screen returns the screen of a session.
func (c *Conch) Screen(id string) Result {
	c.t.Helper()
	return c.Process(map[string]any{"action": "screen", "sessionId": id})
}

// WaitScreen polls the screen until ok accepts it.
func (c *Conch) WaitScreen(id string, what string, ok func(Result) bool) Result {
	c.t.Helper()
	var r Result
	Eventually(c.t, 15*time.Second, func() string {
		r = c.Screen(id)
		if r.IsError || !ok(r) {
			return "screen never showed " + what + ":\n" + r.Text
		}
		return ""
	})
	return r
}
