package engine

import (
	"github.com/conchsh/conch/apitype"
)

// screenAction implements process screen (process.md §5.3).
func (e *Engine) screenAction(s *session, p apitype.ProcessParams) apitype.Result {
	return processError(apitype.Errorf(apitype.CodeUnavailable, "process screen is not available in this build yet."))
}
