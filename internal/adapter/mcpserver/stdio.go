package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxStdioMessageBytes caps one JSON-RPC message read on stdin: the largest
// HTTP request body conch takes (an apply_patch of 8 MiB, escaped) and
// room for the envelope.
const MaxStdioMessageBytes = 32 << 20

// Stdio is the stdio transport of `conch mcp` (newline-delimited JSON-RPC
// on a reader and a writer) that knows which requests it has answered.
//
// It reads stdin one line at a time, each line one message, and hands the
// SDK only messages the SDK can take: the SDK ends the whole session at
// the first line that is not JSON, not a JSON-RPC message, or over its
// size limit, which would cut every call in flight. Such a line is
// answered here instead (-32700 parse error, -32600 invalid request, with
// the request's id where it can be found) and the session goes on.
//
// The SDK drops the responses of requests still in flight once its
// connection closes, so an orderly stop must wait until every request
// read has been answered before it ends the session: Stop the engine
// (which answers the calls at once), wait for Answered, then cancel the
// context given to Run.
type Stdio struct {
	r io.Reader
	w io.Writer

	wmu sync.Mutex // serialises writes to w: the SDK's messages and the answers of bad lines

	mu      sync.Mutex     // guards the fields below
	pending map[string]int // ids of requests read and not yet answered
	quiet   chan struct{}  // closed and replaced when pending becomes empty
	in, out []byte         // partial lines
	version string         // the protocol version the server agreed to
	started bool           // the reading goroutine runs
	pr      *io.PipeReader // what the SDK reads: the messages that passed
	pw      *io.PipeWriter
}

// NewStdio returns a transport reading requests from r and writing to w.
func NewStdio(r io.Reader, w io.Writer) *Stdio {
	pr, pw := io.Pipe()
	return &Stdio{r: r, w: w, pending: map[string]int{}, quiet: make(chan struct{}), pr: pr, pw: pw}
}

// Transport returns the MCP transport to give Run.
func (t *Stdio) Transport() mcp.Transport {
	t.mu.Lock()
	if !t.started {
		t.started = true
		go t.pump()
	}
	t.mu.Unlock()
	return &mcp.IOTransport{Reader: t.pr, Writer: stdioWriter{t}, MaxLineLength: MaxStdioMessageBytes + 1<<20}
}

// pump reads stdin line by line, answers the lines the SDK would end the
// session on, and passes the others on. At the end of stdin a last line
// without its newline is taken as it is.
func (t *Stdio) pump() {
	br := bufio.NewReaderSize(t.r, 64<<10)
	var line []byte
	var size int
	var head []byte // the start of a line over the limit, where its id may be
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		switch {
		case over:
			tailKeep(&line, chunk)
		case size > MaxStdioMessageBytes:
			over = true
			head = append([]byte(nil), line[:min(len(line), 4096)]...)
			if len(head) < 4096 {
				head = append(head, chunk[:min(len(chunk), 4096-len(head))]...)
			}
			line = line[:0]
			tailKeep(&line, chunk)
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 || over {
			if over {
				t.answer(sizeID(head, line), jsonrpc.CodeInvalidRequest, fmt.Sprintf("message of %d bytes is over the limit of %d bytes", size, MaxStdioMessageBytes))
			} else if werr := t.take(line); werr != nil {
				return // the SDK stopped reading
			}
		}
		line, size, head, over = line[:0], 0, nil, false
		if err != nil {
			t.pw.Close()
			return
		}
	}
}

// tailKeep keeps the last 4 KiB of a line over the limit in *tail.
func tailKeep(tail *[]byte, chunk []byte) {
	*tail = append(*tail, chunk...)
	if n := len(*tail); n > 4096 {
		*tail = append((*tail)[:0], (*tail)[n-4096:]...)
	}
}

// take checks one line and passes it to the SDK or answers it.
func (t *Stdio) take(line []byte) error {
	msg := bytes.TrimSpace(line)
	if len(msg) == 0 {
		return nil
	}
	if !json.Valid(msg) {
		t.answer(nil, jsonrpc.CodeParseError, "parse error: a line is not one JSON value (each message is one line of JSON)")
		return nil
	}
	if id, why := t.check(msg); why != "" {
		t.answer(id, jsonrpc.CodeInvalidRequest, "invalid request: "+why)
		return nil
	}
	t.feed(&t.in, append(msg, '\n'), true)
	_, err := t.pw.Write(append(msg, '\n'))
	return err
}

// check reports why the SDK would refuse the JSON value msg ("" when it
// takes it) and the request id to answer with.
func (t *Stdio) check(msg []byte) (json.RawMessage, string) {
	if msg[0] != '[' {
		if _, err := jsonrpc.DecodeMessage(msg); err != nil {
			return validID(msg), err.Error()
		}
		return nil, ""
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(msg, &batch); err != nil {
		return nil, err.Error()
	}
	t.mu.Lock()
	version := t.version
	t.mu.Unlock()
	switch {
	case len(batch) == 0:
		return nil, "empty batch"
	case version >= "2025-06-18":
		return nil, "JSON-RPC batches are not supported in protocol version " + version
	}
	seen := map[jsonrpc.ID]bool{}
	for _, raw := range batch {
		m, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return nil, err.Error()
		}
		if r, ok := m.(*jsonrpc.Request); ok && r.IsCall() {
			if seen[r.ID] {
				return nil, fmt.Sprintf("duplicate id %v in a batch", r.ID.Raw())
			}
			seen[r.ID] = true
		}
	}
	return nil, ""
}

// validID returns msg's id if it is a string or a number.
func validID(msg []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	if m.ID[0] == '"' || m.ID[0] == '-' || m.ID[0] >= '0' && m.ID[0] <= '9' {
		return m.ID
	}
	return nil
}

// The id of a message over the limit: at the top level before its params
// (as clients write it), or as its last member.
var (
	headIDRE = regexp.MustCompile(`^\s*\{\s*(?:"[^"\\]*"\s*:\s*(?:"(?:[^"\\]|\\.)*"|[-+0-9.eE]+|true|false|null)\s*,\s*)*"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9]+)`)
	tailIDRE = regexp.MustCompile(`,\s*"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9]+)\s*\}\s*$`)
)

func sizeID(head, tail []byte) json.RawMessage {
	if m := headIDRE.FindSubmatch(head); m != nil {
		return json.RawMessage(m[1])
	}
	if m := tailIDRE.FindSubmatch(tail); m != nil {
		return json.RawMessage(m[1])
	}
	return nil
}

// answer writes a JSON-RPC error response (id null when id is nil).
func (t *Stdio) answer(id json.RawMessage, code int64, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.w.Write(append(b, '\n'))
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

type stdioWriter struct{ t *Stdio }

func (w stdioWriter) Write(p []byte) (int, error) {
	w.t.wmu.Lock()
	n, err := w.t.w.Write(p)
	w.t.wmu.Unlock()
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
	Result struct {
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"result"`
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
		if m.Result.ProtocolVersion != "" {
			t.version = m.Result.ProtocolVersion
		}
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
	var f float64
	if json.Unmarshal(b.Bytes(), &f) == nil {
		// The SDK answers a number id as an int64 (1.5 as 1).
		return strconv.FormatInt(int64(f), 10)
	}
	return b.String()
}
