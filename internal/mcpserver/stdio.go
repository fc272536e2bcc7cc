package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Stdio is the stdio transport of `conch mcp` (newline-delimited JSON-RPC
// on a reader and a writer) that knows which requests it has answered.
//
// The SDK drops the responses of requests still in flight once its
// connection closes, so an orderly stop must wait until every request
// read has been answered before it ends the session: Stop the engine
// (which answers the calls at once), wait for Answered, then cancel the
// context given to Run.
type Stdio struct {
	r io.Reader
	w io.Writer

	mu      sync.Mutex     // guards the fields below
	pending map[string]int // ids of requests read and not yet answered
	quiet   chan struct{}  // closed and replaced when pending becomes empty
	in, out []byte         // partial lines
}

// NewStdio returns a transport reading requests from r and writing to w.
func NewStdio(r io.Reader, w io.Writer) *Stdio {
	return &Stdio{r: r, w: w, pending: map[string]int{}, quiet: make(chan struct{})}
}

// Transport returns the MCP transport to give Run.
func (t *Stdio) Transport() mcp.Transport {
	return &mcp.IOTransport{Reader: io.NopCloser(stdioReader{t}), Writer: stdioWriter{t}}
}

// Answered returns once every request read so far has been answered (a
// request the client cancelled counts as answered), or with ctx's error.
func (t *Stdio) Answered(ctx context.Context) error {
	for {
		t.mu.Lock()
		n, quiet := len(t.pending), t.quiet
		t.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-quiet:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type stdioReader struct{ t *Stdio }

func (r stdioReader) Read(p []byte) (int, error) {
	n, err := r.t.r.Read(p)
	if n > 0 {
		r.t.feed(&r.t.in, p[:n], true)
	}
	return n, err
}

type stdioWriter struct{ t *Stdio }

func (w stdioWriter) Write(p []byte) (int, error) {
	n, err := w.t.w.Write(p)
	if n > 0 {
		w.t.feed(&w.t.out, p[:n], false)
	}
	return n, err
}

func (stdioWriter) Close() error { return nil }

// wireMsg is what Stdio reads of a JSON-RPC message.
type wireMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
}

// feed adds bytes read (incoming) or written to the partial line in buf
// and accounts for every complete line.
func (t *Stdio) feed(buf *[]byte, p []byte, incoming bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	*buf = append(*buf, p...)
	for {
		i := bytes.IndexByte(*buf, '\n')
		if i < 0 {
			return
		}
		line := bytes.TrimSpace((*buf)[:i])
		*buf = (*buf)[i+1:]
		var msgs []wireMsg
		if len(line) > 0 && line[0] == '[' {
			json.Unmarshal(line, &msgs)
		} else {
			var m wireMsg
			if json.Unmarshal(line, &m) == nil {
				msgs = append(msgs, m)
			}
		}
		for _, m := range msgs {
			t.account(m, incoming)
		}
	}
}

// account updates pending for one message; t.mu is held.
func (t *Stdio) account(m wireMsg, incoming bool) {
	id := idKey(m.ID)
	switch {
	case incoming && m.Method == "notifications/cancelled":
		t.done(idKey(m.Params.RequestID))
	case incoming && m.Method != "" && id != "":
		t.pending[id]++
	case !incoming && m.Method == "" && id != "":
		t.done(id)
	}
}

func (t *Stdio) done(id string) {
	if id == "" || t.pending[id] == 0 {
		return
	}
	if t.pending[id]--; t.pending[id] == 0 {
		delete(t.pending, id)
	}
	if len(t.pending) == 0 {
		close(t.quiet)
		t.quiet = make(chan struct{})
	}
}

// idKey is a request id as a map key; "" for none or null.
func idKey(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil || b.String() == "null" {
		return ""
	}
	return b.String()
}
