package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// deepCommands generates commands of size about n for each shape the
// shell parser recurses through: one stack frame chain per nesting level
// or chained operator.
func deepCommands(n int) map[string]string {
	rep := func(open, mid, close string) string {
		k := (n - len(mid)) / (len(open) + len(close))
		return strings.Repeat(open, k) + mid + strings.Repeat(close, k)
	}
	return map[string]string{
		"command substitution": "echo " + rep("$(", "x", ")"),
		"backquotes":           "echo " + rep("`", "x", "`"),
		"subshells":            rep("(", "x", ")"),
		"blocks":               rep("{ ", "x;", " }"),
		"arithmetic parens":    "echo $((" + rep("(", "1", ")") + "))",
		"arithmetic chain":     "echo $((" + strings.Repeat("1+", n/2) + "1))",
		"and chain":            strings.Repeat("x&&", n/3) + "x",
		"pipeline":             strings.Repeat("x|", n/2) + "x",
		"parameter defaults":   "echo " + rep("${a:-", "x", "}"),
		"if":                   rep("if x;then ", "x", ";fi"),
		"process substitution": "cat " + rep("<(", "x", ")"),
		"test parens":          "[[ " + rep("( ", "a", " )") + " ]]",
		"case":                 rep("case a in a) ", "x", ";; esac"),
		"negations":            strings.Repeat("! ", n/2) + "x",
	}
}

// TestDeepCommandsAnswered: deeply nested or chained commands, at the
// length limit and far over it, get an answer from exec and from policy
// explain; none takes the gateway down. A few megabytes of nested $( used
// to overflow the parser's stack, a fatal error no recover catches.
func TestDeepCommandsAnswered(t *testing.T) {
	home := e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","security":"deny","ask":"off"}}}`)
	g := e2etest.StartGateway(t, home)
	for _, size := range []int{apitype.MaxCommandBytes - 16, apitype.MaxCommandBytes + 1, 2 << 20} {
		for name, cmd := range deepCommands(size) {
			if len(cmd) > size+16 {
				t.Fatalf("%s: generated %d bytes for %d", name, len(cmd), size)
			}
			code, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": cmd}, nil)
			e, _ := m["error"].(map[string]any)
			switch {
			case code == 413:
				// JSON escapes & < > as \u0026…: over the 4 MiB body cap.
			case len(strings.TrimSpace(cmd)) > apitype.MaxCommandBytes:
				if code != 400 || e["code"] != "invalid_argument" || !strings.Contains(fmt.Sprint(e["message"]), "at most 131071") {
					t.Errorf("%s, %d bytes: %d %v", name, len(cmd), code, m)
				}
			case code != 200 && code != 403 && code != 400:
				t.Errorf("%s, %d bytes: %d %.300v", name, len(cmd), code, m)
			}
			if strings.Contains(fmt.Sprint(m), "spawn") {
				t.Errorf("%s, %d bytes: started under security deny: %.300v", name, len(cmd), m)
			}
			code, m = g.Do("POST", "/v1/policy/explain", g.Operator, map[string]any{"command": cmd}, nil)
			if code != 200 && code != 400 && code != 413 {
				t.Errorf("explain %s, %d bytes: %d %.300v", name, len(cmd), code, m)
			}
			if code, _ := g.Do("GET", "/v1/health", "", nil, nil); code != 200 {
				t.Fatalf("after %s, %d bytes: health %d", name, len(cmd), code)
			}
		}
	}
}
