package engine

import (
	_ "embed"
	"encoding/json"
	"regexp"
	"strings"
	"time"

	"github.com/conchsh/conch/apitype"
)

//go:embed prompts.json
var promptsJSON []byte

var promptPatterns = func() []*regexp.Regexp {
	var f struct {
		Patterns []string `json:"patterns"`
	}
	if err := json.Unmarshal(promptsJSON, &f); err != nil {
		panic("prompts.json: " + err.Error())
	}
	out := make([]*regexp.Regexp, len(f.Patterns))
	for i, p := range f.Patterns {
		out[i] = regexp.MustCompile("(?i)" + p)
	}
	return out
}()

// awaiting reports whether s is awaiting input: silent
// for promptIdleMs since its last output (and since the last input), with
// a last line that looks like a prompt. It is a heuristic by design.
func (e *Engine) awaiting(s *session) *apitype.Awaiting {
	if !s.running() || s.pending() {
		return nil
	}
	s.mu.Lock()
	last := s.lastOutput
	if s.lastInput.After(last) {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if last.IsZero() {
		return nil
	}
	idle := time.Since(last)
	if idle < e.conf().Exec(s.agent).PromptIdle {
		return nil
	}
	tail, _ := e.tail(s, 400)
	lines := strings.Split(tail, "\n")
	line := strings.TrimRight(lines[len(lines)-1], " \t")
	if line == "" {
		return nil
	}
	for _, re := range promptPatterns {
		if re.MatchString(line) {
			return &apitype.Awaiting{Prompt: strings.TrimSpace(line), IdleMs: idle.Milliseconds()}
		}
	}
	return nil
}
