package apitype

// WaitDetails is the details object of process wait.
type WaitDetails struct {
	Status    string `json:"status"`
	Outcome   string `json:"outcome"` // met | exited | timeout
	Until     any    `json:"until"`
	Fired     string `json:"fired,omitempty"`
	SessionID string `json:"sessionId"`
	ElapsedMs int64  `json:"elapsedMs"`
	// Cursor is the end of the output in the text (the session's
	// newest output when it was read): pass it as since to read on.
	Cursor int64 `json:"cursor"`
	// Since is where the output in the text starts: the since argument,
	// else the caller's last read (as for poll).
	Since        int64      `json:"since"`
	SkippedChars int        `json:"skippedChars,omitempty"`
	SkippedBytes int64      `json:"skippedBytes,omitempty"`
	Tail         string     `json:"tail"`
	Match        *LineMatch `json:"match,omitempty"`
	ExitCode     *int       `json:"exitCode,omitempty"`
	Signal       *string    `json:"signal,omitempty"`
	KilledBy     *string    `json:"killedBy,omitempty"`
	State        string     `json:"state"`
	// AwaitingInput is set when the wait ended on a prompt.
	AwaitingInput *Awaiting `json:"awaitingInput,omitempty"`
	// View is "screen" when the output in the text is the terminal's
	// screen (see PollDetails.View).
	View string `json:"view,omitempty"`
}

// LineMatch is a matched line: 1-based line number, 0-based offset for
// log, and the cursor just after the line.
type LineMatch struct {
	Line   int      `json:"line"`
	Offset int      `json:"offset"`
	Cursor int64    `json:"cursor"`
	Text   string   `json:"text"`
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// SearchDetails is the details object of process search.
type SearchDetails struct {
	Status       string      `json:"status"`
	SessionID    string      `json:"sessionId"`
	Pattern      string      `json:"pattern"`
	TotalMatches int         `json:"totalMatches"`
	Returned     int         `json:"returned"`
	Truncated    bool        `json:"truncated"`
	Cursor       int64       `json:"cursor"`
	Matches      []LineMatch `json:"matches"`
}

// ScreenDetails is the details object of process screen.
type ScreenDetails struct {
	Status    string `json:"status"`
	SessionID string `json:"sessionId"`
	Cols      int    `json:"cols"`
	Rows      int    `json:"rows"`
	// CursorRow and CursorCol are 1-based.
	CursorRow     int    `json:"cursorRow"`
	CursorCol     int    `json:"cursorCol"`
	CursorVisible bool   `json:"cursorVisible"`
	AltScreen     bool   `json:"altScreen"`
	Title         string `json:"title"`
	// Lines holds every row of the screen (len(Lines) == Rows), trailing
	// spaces trimmed; the text drops the trailing empty rows.
	Lines []string `json:"lines"`
	// Cursor is the journal position the screen shows the output up to.
	Cursor int64 `json:"cursor"`
	// Approximate is set when the screen was built from part of the
	// output: the journal dropped bytes, a finished session's replay
	// started after the beginning, or the live emulator fell behind.
	Approximate bool `json:"approximate"`
}

// ApprovalDetails is the details object of an exec result with status
// approval-pending.
type ApprovalDetails struct {
	Status       string            `json:"status"`
	ApprovalID   string            `json:"approvalId"`
	ApprovalSlug string            `json:"approvalSlug"`
	SessionID    string            `json:"sessionId"`
	ExpiresAtMs  int64             `json:"expiresAtMs"`
	Host         string            `json:"host"`
	NodeID       string            `json:"nodeId,omitempty"`
	NodeName     string            `json:"nodeName,omitempty"`
	Command      string            `json:"command"`
	Cwd          string            `json:"cwd"`
	Reason       string            `json:"reason"`
	Segments     []ApprovalSegment `json:"segments"`
	Warnings     []string          `json:"warnings,omitempty"`
}

// ApprovalSegment is one analysed segment shown with an approval.
type ApprovalSegment struct {
	Text    string `json:"text"`
	Verdict string `json:"verdict"`
}
