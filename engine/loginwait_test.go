package engine

import (
	"testing"
	"time"
)

// TestLoginWaitWithinWindow: a run waits for the login-shell probe within
// its yield window, leaving itself the last second (at least half).
func TestLoginWaitWithinWindow(t *testing.T) {
	for window, want := range map[time.Duration]time.Duration{
		-1:                     -1,
		0:                      0,
		500 * time.Millisecond: 250 * time.Millisecond,
		2 * time.Second:        time.Second,
		10 * time.Second:       9 * time.Second,
	} {
		if got := loginWait(window); got != want {
			t.Errorf("loginWait(%v) = %v, want %v", window, got, want)
		}
		if window > 0 && loginWait(window) >= window {
			t.Errorf("loginWait(%v) leaves the command no time", window)
		}
	}
}
