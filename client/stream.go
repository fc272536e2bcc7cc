package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Output is one chunk of a session's output delivered by Stream.
type Output struct {
	// Cursor is the journal position just after the chunk; a later
	// Stream with Since = Cursor continues after it.
	Cursor int64  `json:"cursor"`
	Stream string `json:"stream"` // "stdout" or "stderr" (PTY sessions: one stream)
	Text   string `json:"text"`   // rendered text, or raw with StreamOptions.Raw
}

// End is a session's end state as Stream reports it.
// Pointers are nil when the state has no such value: exitCode is null for
// a signal death, signal and killedBy are null for a normal exit.
type End struct {
	State    string  `json:"state"` // exited, signaled, killed, lost, denied
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
	KilledBy *string `json:"killedBy"` // agent, operator, timeout, shutdown
}

// StreamOptions configure Stream.
type StreamOptions struct {
	// Since is the journal cursor to start from; 0 is the beginning.
	Since int64
	// Raw asks for unrendered text (escapes kept).
	Raw bool
	// Stream selects "stdout" or "stderr"; "" or "both" is both.
	Stream string
	// MaxRetries is how many reconnections in a row may fail to deliver
	// anything before Stream gives up; 0 means 5, negative means none.
	MaxRetries int
}

// callbackError carries an error returned by Stream's callback, so that
// it is not taken for a broken connection.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// Stream follows a session's output (GET /v1/sessions/{id}/stream,
// server-sent events) and calls fn for every chunk, in order, until the
// session ends; it returns the end state. When the connection breaks it
// reconnects with Last-Event-ID (and since) set to the last chunk seen, so
// no output is lost or repeated. It returns early with ctx's error when
// ctx ends, with fn's error unchanged when fn fails, with an *Error when
// the API refuses the stream (e.g. not_found), and after
// StreamOptions.MaxRetries fruitless reconnections. fn runs on the
// caller's goroutine.
func (c *Client) Stream(ctx context.Context, id string, opt StreamOptions, fn func(Output) error) (End, error) {
	maxRetries := opt.MaxRetries
	if maxRetries == 0 {
		maxRetries = 5
	}
	st := &streamState{since: opt.Since}
	fails := 0
	for {
		progressed, end, err := c.streamOnce(ctx, id, opt, st, fn)
		if err == nil {
			return end, nil
		}
		var cbErr callbackError
		if errors.As(err, &cbErr) {
			return End{}, cbErr.err
		}
		if ctx.Err() != nil {
			return End{}, ctx.Err()
		}
		var ae *Error
		if errors.As(err, &ae) && ae.Status != http.StatusBadGateway && ae.Status != http.StatusServiceUnavailable && ae.Status != http.StatusGatewayTimeout {
			return End{}, err
		}
		if progressed {
			fails = 0
		} else {
			fails++
		}
		if fails > maxRetries {
			return End{}, fmt.Errorf("stream session %s: %w", id, err)
		}
		delay := st.retry
		if delay <= 0 {
			delay = min(250*time.Millisecond<<fails, 5*time.Second)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return End{}, ctx.Err()
		case <-t.C:
		}
	}
}

// streamState is what a reconnection resumes from.
type streamState struct {
	since  int64
	lastID string
	retry  time.Duration // the server's "retry:" hint
}

// streamOnce reads one SSE connection. It returns a nil error only after
// an end event; progressed reports whether any output arrived.
func (c *Client) streamOnce(ctx context.Context, id string, opt StreamOptions, st *streamState, fn func(Output) error) (progressed bool, end End, err error) {
	q := url.Values{"since": {strconv.FormatInt(st.since, 10)}}
	if opt.Raw {
		q.Set("raw", "true")
	}
	if opt.Stream != "" && opt.Stream != "both" {
		q.Set("stream", opt.Stream)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+sessionPath(id, "stream")+"?"+q.Encode(), nil)
	if err != nil {
		return false, end, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if st.lastID != "" {
		req.Header.Set("Last-Event-ID", st.lastID)
	}
	c.authorize(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, end, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return false, end, apiError(resp, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var event, evID string
	var data strings.Builder
	hasID := false
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			// Dispatch the event.
			name, payload := event, data.String()
			event = ""
			data.Reset()
			if hasID {
				st.lastID = evID
			}
			hasID = false
			switch name {
			case "output":
				var o Output
				if err := json.Unmarshal([]byte(payload), &o); err != nil {
					return progressed, end, fmt.Errorf("stream session %s: bad output event: %w", id, err)
				}
				if o.Cursor > st.since {
					st.since = o.Cursor
				}
				progressed = true
				if err := fn(o); err != nil {
					return progressed, end, callbackError{err}
				}
			case "end":
				if err := json.Unmarshal([]byte(payload), &end); err != nil {
					return progressed, end, fmt.Errorf("stream session %s: bad end event: %w", id, err)
				}
				return progressed, end, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // comment (keep-alive ping)
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		case "id":
			if !strings.ContainsRune(value, 0) {
				evID, hasID = value, true
			}
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
				st.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := sc.Err(); err != nil {
		return progressed, end, err
	}
	return progressed, end, io.ErrUnexpectedEOF
}
