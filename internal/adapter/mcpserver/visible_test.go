package mcpserver

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/term/visible"
)

// TestApprovalQuestionEscapes: the approval question an MCP client shows
// to the person deciding holds no hidden character of the command, the
// directory or the reason (every one generated), each field on its line.
func TestApprovalQuestionEscapes(t *testing.T) {
	var b strings.Builder
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if utf8.ValidRune(r) && visible.Hidden(r) {
			b.WriteString("<" + string(r) + ">")
		}
	}
	payload := b.String()
	s := &Server{opt: Options{Agent: "main"}}
	q := s.approvalQuestion(&apitype.ApprovalDetails{
		Host: "gateway", Command: "touch x #" + payload, Cwd: "/tmp/d" + payload, Reason: "analysis failed: " + payload,
		ExpiresAtMs: time.Now().Add(time.Minute).UnixMilli(), ApprovalSlug: "abcd1234",
	})
	lines := strings.Split(q.Message, "\n")
	if len(lines) != 5 || lines[1] != "Command: touch x #"+visible.Line(payload) || lines[2] != "Directory: /tmp/d"+visible.Line(payload) {
		t.Fatalf("question: %d lines\n%s", len(lines), visible.Text(q.Message))
	}
	for _, r := range q.Message {
		if r != '\n' && visible.Hidden(r) {
			t.Fatalf("%U raw in the question", r)
		}
	}
}
