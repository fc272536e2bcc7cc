package apitype

import (
	"strings"
	"testing"
)

// TestRangeMessageBounded: whatever number a client sends, the message
// that refuses it stays short (a huge number is written with an exponent).
func TestRangeMessageBounded(t *testing.T) {
	for _, n := range []string{"1e308", "-1e308", "1e21", "123456789012345678901234567890", "1.7976931348623157e308"} {
		// Beyond ±2^53 a number is refused even where the range clamps.
		_, e := ParseExecParams([]byte(`{"command":"true","yieldMs":` + n + `}`))
		if e == nil {
			t.Fatalf("yieldMs %s accepted", n)
		}
		if len(e.Message) > 160 || !strings.Contains(e.Message, "yieldMs") {
			t.Errorf("yieldMs %s: message of %d bytes: %q", n, len(e.Message), e.Message)
		}
	}
}
