package apitype_test

import (
	"strings"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/policy"
)

// TestCommandLengthCap: exec takes a command of MaxCommandBytes and refuses
// one byte more, and the policy's analysis has the same cap.
func TestCommandLengthCap(t *testing.T) {
	if apitype.MaxCommandBytes != policy.MaxCommandBytes {
		t.Fatalf("exec's cap %d, the policy's %d", apitype.MaxCommandBytes, policy.MaxCommandBytes)
	}
	at := `{"command":"` + strings.Repeat("a", apitype.MaxCommandBytes) + `"}`
	if _, e := apitype.ParseExecParams([]byte(at)); e != nil {
		t.Fatalf("at the cap: %v", e)
	}
	over := `{"command":"` + strings.Repeat("a", apitype.MaxCommandBytes+1) + `"}`
	if _, e := apitype.ParseExecParams([]byte(over)); e == nil || e.Code != apitype.CodeInvalidArgument {
		t.Fatalf("over the cap: %v", e)
	}
}
