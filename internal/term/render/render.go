package render

import (
	"encoding/binary"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
)

// DefaultMaxLineBytes is the default for [Options].MaxLineBytes: 1 MiB.
const DefaultMaxLineBytes = 1 << 20

// resyncWindow is how many bytes [Options].Resync looks at (at most, and
// never past the first LF) to decide where the first boundary is.
const resyncWindow = 512

// A Line is one rendered line and the raw bytes it came from.
type Line struct {
	// Cursor is the raw cursor of the line's first byte: the byte after the
	// previous line's end, or the start cursor given to [New].
	Cursor int64
	// End is the raw cursor just after the line: after its terminating LF,
	// before the first byte of the character that did not fit for a line
	// broken at [Options].MaxLineBytes (the next line's Cursor), or after the
	// last byte written for a partial line.
	// raw[Cursor:End] holds everything the line was rendered from.
	End int64
	// Text is the rendered text, without the LF. It is valid UTF-8.
	Text string
	// Partial reports a line emitted by Flush: the input ended before an LF.
	Partial bool
}

// Options tune a [Renderer]. The zero value renders with every rule of the
// package documentation.
type Options struct {
	// Raw skips steps 2–5: only UTF-8 sanitising, Cf removal and line
	// splitting happen. Escapes, controls and CRs are kept in the text.
	Raw bool

	// Resync declares that the first bytes may start inside a UTF-8 sequence
	// or an escape sequence whose beginning is not available (a read at an
	// arbitrary cursor). Up to three leading UTF-8 continuation bytes are
	// skipped. Outside Raw mode the first bytes (up to the first LF, at most
	// 512) are also checked for the tail of a sequence, which is skipped:
	//   - the rest of a string sequence: text ended by BEL or by ST (ESC \)
	//     before any LF or other ESC;
	//   - the rest of a CSI: "[" + parameters + a letter ("[31m", "[?25l",
	//     "[K", "[m", "[J"), or, without the "[", parameters holding ";" or
	//     starting with "?" followed by a letter ("1;31m", "?2004h"), or one
	//     to three digits followed by "m" or "K" ("0m", "31m", "2K").
	// This is a heuristic: text such as "5m30s" at the very start of the read
	// loses its "5m", so set Resync only for reads that do not start at a
	// known boundary (cursor 0, a line start). Prefer [Renderer.Prime] with the bytes before the start
	// when they are available; it is exact and turns the heuristic off.
	// The skipped bytes still belong to the first line (its Cursor is start).
	Resync bool

	// MaxLineBytes caps the rendered text of one line, in bytes; a longer
	// line is broken (see [Line].End). Zero or less means DefaultMaxLineBytes.
	// Values below 4 are raised to 4 so that any character fits.
	MaxLineBytes int
}

// A Renderer renders a stream of raw output bytes into lines.
//
// Create it with [New]; the zero value is not usable. A Renderer is not safe
// for concurrent use. Its memory is bounded by a few times
// [Options].MaxLineBytes (it grows only as long lines require), whatever the
// input.
type Renderer struct {
	raw     bool
	maxLine int

	pos       int64 // raw cursor of the next byte not yet consumed (pend excluded)
	charStart int64 // raw cursor of the first byte of the character being handled
	lineStart int64 // raw cursor of the current line's first byte

	// pend holds the bytes of a UTF-8 sequence cut by the end of a Write.
	pend  [utf8.UTFMax]byte
	npend int

	// resync: the leading bytes are collected in rsBuf until the first
	// boundary can be decided.
	resyncing bool
	started   bool // Write or Prime was called
	rsBuf     []byte

	// Step 2: esc recognises escape sequences (created at the first ESC
	// or C1 control). It is fed ASCII only: C1 controls as their 7-bit
	// ESC equivalents, never the bytes of other characters.
	esc       *ansi.Parser
	csiIgnore bool // a malformed CSI: swallowed up to its final byte
	csiBad    bool // the CSI being read is malformed: its dispatch does nothing
	csiFirst  bool // the CSI's first parameter is being read
	csiParam  int  // value of the first parameter (capped)
	ss        bool // after SS2/SS3: the next character is dropped

	// The line is a gap buffer: head is the text before the cursor, and
	// tail[tailOff:] the text after it (left over from before a CR).
	head      []byte
	tail      []byte // len(tail) == cap(tail); content is tail[tailOff:]
	tailOff   int
	pendingCR bool // a CR was seen; it takes effect when something is written
}

// New returns a Renderer whose first written byte has raw cursor start.
func New(start int64, opt Options) *Renderer {
	m := opt.MaxLineBytes
	if m <= 0 {
		m = DefaultMaxLineBytes
	}
	if m < utf8.UTFMax {
		m = utf8.UTFMax
	}
	return &Renderer{
		raw:       opt.Raw,
		maxLine:   m,
		pos:       start,
		lineStart: start,
		resyncing: opt.Resync,
	}
}

// Prime feeds ctx, the raw bytes immediately before the start cursor, through
// the decoder and the escape parser without producing any text, so that a
// UTF-8 or escape sequence that began before start is recognised exactly. It
// turns [Options].Resync off. Prime must be called before the first Write;
// later calls do nothing. A character whose first byte lies before start is
// rendered at the start of the first line.
func (r *Renderer) Prime(ctx []byte) {
	if r.started {
		return
	}
	r.started = true
	r.resyncing = false
	start := r.pos
	r.write(ctx, func(Line) {})
	r.head = r.head[:0]
	r.tailOff = len(r.tail)
	r.pendingCR = false
	r.pos = start - int64(r.npend)
	r.lineStart = start
}

// Write renders p, the next raw bytes of the stream, and calls emit for each
// line completed by them, in order. Incomplete sequences at the end of p are
// kept for the next Write; p itself is not retained. emit must not call the
// Renderer.
func (r *Renderer) Write(p []byte, emit func(Line)) {
	r.started = true
	if r.resyncing {
		p = r.collectResync(p, false, emit)
		if r.resyncing {
			return
		}
	}
	r.write(p, emit)
}

// Flush ends the stream: an incomplete UTF-8 sequence becomes U+FFFD (one
// per byte), an incomplete escape sequence is dropped, and the last line is
// emitted with Partial set if its text is not empty (an input ending in LF
// therefore emits nothing more: a trailing empty line is not a line).
// Afterwards the Renderer starts afresh, with a new line and the parser in
// its ground state, at the cursor after the last byte written.
func (r *Renderer) Flush(emit func(Line)) {
	if r.resyncing {
		r.collectResync(nil, true, emit)
	}
	for r.npend > 0 {
		// An incomplete sequence: DecodeRune reports (RuneError, 1) for it
		// and for each continuation byte left after that.
		b := r.pend
		n := r.npend
		c, size := utf8.DecodeRune(b[:n])
		copy(r.pend[:], b[size:n])
		r.npend -= size
		r.charStart = r.pos
		r.pos += int64(size)
		r.char(c, emit)
	}
	if len(r.head) > 0 || r.tailOff < len(r.tail) {
		r.emitLine(r.pos, true, emit)
	}
	r.head = r.head[:0]
	r.tailOff = len(r.tail)
	r.pendingCR = false
	r.resetEscape()
	r.lineStart = r.pos
}

// collectResync gathers the leading bytes until the first boundary can be
// decided, then renders them from that boundary on. It returns the part of p
// it did not take.
func (r *Renderer) collectResync(p []byte, final bool, emit func(Line)) []byte {
	n := 0
	for n < len(p) && len(r.rsBuf)+n < resyncWindow {
		n++
		if p[n-1] == '\n' {
			final = true
			break
		}
	}
	r.rsBuf = append(r.rsBuf, p[:n]...)
	if len(r.rsBuf) >= resyncWindow {
		final = true
	}
	if !final {
		return nil
	}
	r.resyncing = false
	buf := r.rsBuf
	r.rsBuf = nil
	skip := resyncSkip(buf, r.raw)
	r.pos += int64(skip)
	r.write(buf[skip:], emit)
	return p[n:]
}

// resyncSkip returns how many leading bytes of w belong to a sequence whose
// beginning is missing (see Options.Resync).
func resyncSkip(w []byte, raw bool) int {
	i := 0
	for i < len(w) && i < utf8.UTFMax-1 && w[i]&0xC0 == 0x80 {
		i++
	}
	if raw {
		return i
	}
	rest := w[i:]
	for j := 0; j < len(rest); j++ {
		b := rest[j]
		if b == '\n' {
			break
		}
		if b == 0x07 {
			return i + j + 1
		}
		if b == 0x1B {
			if j+1 < len(rest) && rest[j+1] == '\\' {
				return i + j + 2
			}
			break
		}
		if b == 0xC2 && j+1 < len(rest) && rest[j+1] == 0x9C { // U+009C ST
			return i + j + 2
		}
	}
	return i + csiTail(rest)
}

// csiTail returns the length of the tail of a CSI sequence that w starts
// with, or 0 (see Options.Resync for the accepted shapes).
func csiTail(w []byte) int {
	j := 0
	bracket := len(w) > 0 && w[0] == '['
	if bracket {
		j++
	}
	ps := j
	for j < len(w) && j-ps <= 32 && w[j] >= 0x30 && w[j] <= 0x3F {
		j++
	}
	params := w[ps:j]
	if j >= len(w) || len(params) > 32 {
		return 0
	}
	f := w[j]
	if !(f >= 'a' && f <= 'z' || f >= 'A' && f <= 'Z') {
		return 0
	}
	switch {
	case bracket && len(params) > 0:
	case bracket && (f == 'K' || f == 'm' || f == 'J'):
	case len(params) > 0 && (params[0] == '?' || containsByte(params, ';')):
	case len(params) > 0 && len(params) <= 3 && allDigits(params) && (f == 'm' || f == 'K'):
	default:
		return 0
	}
	return j + 1
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

func allDigits(b []byte) bool {
	for _, x := range b {
		if x < '0' || x > '9' {
			return false
		}
	}
	return true
}

// write decodes p and feeds it to the parser.
func (r *Renderer) write(p []byte, emit func(Line)) {
	i := 0
	if r.npend > 0 {
		i = r.finishPending(p, emit)
	}
	for i < len(p) {
		if r.inGround() && !r.pendingCR && r.tailOff == len(r.tail) {
			// Fast path: a run of printable ASCII (any ASCII but LF in raw
			// mode) appended to a line with nothing after the cursor.
			j := i
			if r.raw {
				j = asciiRun(p, j)
			} else {
				j = printableRun(p, j)
			}
			if j > i {
				r.appendRun(p[i:j], emit)
				i = j
				continue
			}
		}
		b := p[i]
		r.charStart = r.pos
		if b < utf8.RuneSelf {
			i++
			r.pos++
			r.char(rune(b), emit)
			continue
		}
		if !utf8.FullRune(p[i:]) {
			r.npend = copy(r.pend[:], p[i:])
			return
		}
		c, size := utf8.DecodeRune(p[i:])
		i += size
		r.pos += int64(size)
		r.char(c, emit)
	}
}

// finishPending completes the UTF-8 sequence held in pend with the first
// bytes of p, exactly as decoding pend and p as one buffer would, and
// returns how many bytes of p it consumed.
func (r *Renderer) finishPending(p []byte, emit func(Line)) int {
	var tmp [2 * utf8.UTFMax]byte
	np := copy(tmp[:], r.pend[:r.npend])
	n := np + copy(tmp[np:], p)
	k := 0
	for k < np {
		if !utf8.FullRune(tmp[k:n]) {
			// Still incomplete: p was too short to decide.
			r.npend = copy(r.pend[:], tmp[k:n])
			return len(p)
		}
		c, size := utf8.DecodeRune(tmp[k:n])
		k += size
		r.charStart = r.pos
		r.pos += int64(size)
		r.char(c, emit)
	}
	r.npend = 0
	return k - np
}

// appendRun appends printable ASCII at the cursor of a line with an empty
// tail and no pending CR, breaking the line at MaxLineBytes exactly as put
// would.
func (r *Renderer) appendRun(run []byte, emit func(Line)) {
	for len(run) > 0 {
		if len(r.head) >= r.maxLine {
			r.breakLine(r.pos, emit)
		}
		n := min(r.maxLine-len(r.head), len(run))
		r.head = append(r.head, run[:n]...)
		r.pos += int64(n)
		run = run[n:]
	}
}

// char feeds one decoded character.
func (r *Renderer) char(c rune, emit func(Line)) {
	if c >= 0x80 && unicode.Is(unicode.Cf, c) {
		return // step 1
	}
	if r.raw {
		if c == '\n' {
			r.endLine(emit)
			return
		}
		r.put(c, emit)
		return
	}
	if r.inGround() {
		r.ground(c, emit)
		return
	}
	r.sequence(c, emit)
}

// inGround reports whether the parser is outside any escape sequence.
func (r *Renderer) inGround() bool {
	return (r.esc == nil || r.esc.State() == parser.GroundState) && !r.csiIgnore && !r.ss
}

// resetEscape abandons any escape sequence being read.
func (r *Renderer) resetEscape() {
	if r.esc != nil {
		r.esc.Reset()
	}
	r.csiIgnore, r.csiBad, r.ss = false, false, false
}

// ground handles a character outside any sequence.
func (r *Renderer) ground(c rune, emit func(Line)) {
	switch {
	case c >= 0x20 && c < 0x7F || c >= 0xA0:
		r.put(c, emit)
	case c == 0x1B:
		r.feed(0x1B)
	case c >= 0x80 && c <= 0x9F:
		r.c1(c)
	case c < 0x20:
		r.control(c, emit)
	}
	// DEL is dropped.
}

// c1 handles an 8-bit C1 control (as a code point) anywhere: it ends the
// sequence being read and acts as its 7-bit form ESC + (c - 0x40) (CSI
// U+009B is ESC [, ST U+009C is ESC \, …).
func (r *Renderer) c1(c rune) {
	r.resetEscape()
	r.feed(0x1B)
	r.feed(byte(c - 0x40))
}

// sequence handles a character inside an escape sequence, a string
// sequence or after SS2/SS3. The escape parser (github.com/charmbracelet/x/ansi)
// keeps the state; the cases below are where ECMA-48 asks more of it: C0
// controls act without touching the sequence, CAN and SUB abort it, an ESC
// starts a new one, a character that is not ASCII ends a control sequence
// and is text, and a malformed CSI is ignored up to its final byte.
func (r *Renderer) sequence(c rune, emit func(Line)) {
	if c >= 0x80 && c <= 0x9F {
		r.c1(c)
		return
	}
	if r.ss {
		// The character SS2/SS3 applies to is dropped; controls still act.
		r.ss = false
		switch {
		case c == 0x1B:
			r.feed(0x1B)
		case c == 0x18 || c == 0x1A:
		case c < 0x20:
			r.control(c, emit)
		}
		return
	}
	st := r.esc.State()
	ctl := r.csiIgnore || inControl(st)
	switch {
	case c == 0x18 || c == 0x1A: // CAN, SUB
		r.resetEscape()
	case c == 0x1B:
		r.resetEscape()
		r.feed(0x1B)
	case c == 0x7F:
		// DEL is ignored everywhere.
	case c >= 0xA0:
		if ctl {
			// Not part of any control sequence: the sequence ends and
			// the character is text.
			r.resetEscape()
			r.put(c, emit)
		}
		// Inside a string sequence it is part of the string.
	case c < 0x20:
		if ctl {
			r.control(c, emit)
			return
		}
		r.feed(byte(c)) // strings: BEL ends an OSC, others are part of it
	case r.csiIgnore:
		if c >= 0x40 {
			r.csiIgnore = false
		}
	case st == parser.CsiParamState && c >= 0x3C && c <= 0x3F:
		// A private marker after a parameter: malformed.
		r.csiBad = true
	case st == parser.CsiIntermediateState && c >= 0x30 && c <= 0x3F:
		// A parameter byte after an intermediate: malformed, and
		// ignored up to the final byte.
		r.esc.Reset()
		r.csiIgnore = true
	default:
		if st == parser.CsiEntryState || st == parser.CsiParamState {
			switch {
			case c >= '0' && c <= '9':
				if r.csiFirst && r.csiParam < 1<<16 {
					r.csiParam = r.csiParam*10 + int(c-'0')
				}
			case c == ';' || c == ':':
				r.csiFirst = false
			}
		}
		r.feed(byte(c))
	}
}

// inControl reports whether st is inside an escape or control sequence (not
// a string sequence).
func inControl(st parser.State) bool {
	switch st {
	case parser.EscapeState, parser.EscapeIntermediateState, parser.CsiEntryState, parser.CsiParamState, parser.CsiIntermediateState:
		return true
	}
	return false
}

// feed advances the escape parser by one ASCII byte.
func (r *Renderer) feed(b byte) {
	if r.esc == nil {
		r.esc = new(ansi.Parser)
		r.esc.SetParamsSize(parser.MaxParamsSize)
		r.esc.SetDataSize(1) // the contents of string sequences are not kept
		r.esc.SetHandler(ansi.Handler{HandleCsi: r.dispatchCSI, HandleEsc: r.dispatchEsc})
	}
	r.esc.Advance(b)
	if r.esc.State() == parser.CsiEntryState && b == '[' {
		r.csiBad, r.csiFirst, r.csiParam = false, true, 0
	}
}

// dispatchEsc handles a complete ESC sequence: SS2 and SS3 (ESC N, ESC O)
// drop the character after them; the others are only removed.
func (r *Renderer) dispatchEsc(cmd ansi.Cmd) {
	if cmd.Intermediate() == 0 && (cmd.Final() == 'N' || cmd.Final() == 'O') {
		r.ss = true
	}
}

// control handles a C0 control (step 3 and 4).
func (r *Renderer) control(c rune, emit func(Line)) {
	switch c {
	case '\n':
		r.endLine(emit)
	case '\r':
		r.pendingCR = true
	case '\t':
		r.put(c, emit)
	case '\b':
		// At the end of the line BS deletes the character before the
		// cursor; inside the line (after a CR) it moves the cursor left,
		// so that the next character overwrites it, as in a terminal.
		r.applyCR()
		n := len(r.head)
		if n == 0 {
			return
		}
		_, size := utf8.DecodeLastRune(r.head)
		if r.tailOff < len(r.tail) {
			r.prependTail(r.head[n-size:])
		}
		r.head = r.head[:n-size]
	}
	// Others are dropped.
}

// dispatchCSI handles a complete CSI sequence. EL and CHA to column 1 act
// on the line (step 4); everything else is only removed.
func (r *Renderer) dispatchCSI(cmd ansi.Cmd, _ ansi.Params) {
	if r.csiBad || cmd.Prefix() != 0 || cmd.Intermediate() != 0 {
		return
	}
	switch cmd.Final() {
	case 'G': // CHA
		if r.csiParam <= 1 {
			r.pendingCR = true
		}
	case 'K': // EL
		r.applyCR()
		switch r.csiParam {
		case 0:
			r.tailOff = len(r.tail)
		case 1:
			r.head = r.head[:0]
		case 2:
			r.head = r.head[:0]
			r.tailOff = len(r.tail)
		}
	}
}

// applyCR makes a pending CR take effect: the cursor moves to the start of
// the line, so the text before it becomes text after it.
func (r *Renderer) applyCR() {
	if !r.pendingCR {
		return
	}
	r.pendingCR = false
	if len(r.head) > 0 {
		r.prependTail(r.head)
		r.head = r.head[:0]
	}
}

// prependTail inserts b at the start of the text after the cursor.
func (r *Renderer) prependTail(b []byte) {
	n := len(b)
	if r.tailOff < n {
		content := len(r.tail) - r.tailOff
		size := max(2*len(r.tail), n+content, 64)
		nt := make([]byte, size)
		copy(nt[size-content:], r.tail[r.tailOff:])
		r.tail = nt
		r.tailOff = size - content
	}
	r.tailOff -= n
	copy(r.tail[r.tailOff:], b)
}

// put writes one character at the cursor, overwriting the character after
// the cursor if any. If the line would grow beyond MaxLineBytes, it is
// broken before the character.
func (r *Renderer) put(c rune, emit func(Line)) {
	r.applyCR()
	over := 0
	if r.tailOff < len(r.tail) {
		_, over = utf8.DecodeRune(r.tail[r.tailOff:])
	}
	if len(r.head)+len(r.tail)-r.tailOff-over+utf8.RuneLen(c) > r.maxLine {
		r.breakLine(r.charStart, emit)
		over = 0
	}
	r.tailOff += over
	if c < utf8.RuneSelf {
		r.head = append(r.head, byte(c))
	} else {
		r.head = utf8.AppendRune(r.head, c)
	}
}

// endLine ends the line at an LF. A pending CR has no effect.
func (r *Renderer) endLine(emit func(Line)) {
	r.breakLine(r.pos, emit)
}

// breakLine ends the line at raw cursor end (before the character that does
// not fit, for a line that reached MaxLineBytes).
func (r *Renderer) breakLine(end int64, emit func(Line)) {
	r.emitLine(end, false, emit)
	r.head = r.head[:0]
	r.tailOff = len(r.tail)
	r.pendingCR = false
	r.lineStart = end
}

func (r *Renderer) emitLine(end int64, partial bool, emit func(Line)) {
	var text string
	if r.tailOff == len(r.tail) {
		text = string(r.head)
	} else {
		r.head = append(r.head, r.tail[r.tailOff:]...)
		text = string(r.head)
	}
	emit(Line{Cursor: r.lineStart, End: end, Text: text, Partial: partial})
}

// Lines renders b, whose first byte has raw cursor start, and returns its
// lines, the last one Partial if b does not end in LF (and its text is not
// empty).
func Lines(b []byte, start int64, opt Options) []Line {
	var lines []Line
	add := func(l Line) { lines = append(lines, l) }
	r := New(start, opt)
	r.Write(b, add)
	r.Flush(add)
	return lines
}

// Text renders b with the default options and returns the text: every
// complete line followed by "\n", then the partial last line if any. So the
// result ends in "\n" exactly when the rendering of b does: Text("a\n") is
// "a\n", Text("a") is "a", and Text("a\n\x1b[0m") is "a\n". Repeats are not
// folded.
func Text(b []byte) string {
	var out []byte
	r := New(0, Options{})
	add := func(l Line) {
		out = append(out, l.Text...)
		if !l.Partial {
			out = append(out, '\n')
		}
	}
	r.Write(b, add)
	r.Flush(add)
	return string(out)
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// printableRun returns the index of the first byte at or after i in p that is
// not printable ASCII (0x20–0x7E), or len(p). It looks at eight bytes at a
// time: a word passes when none of its bytes is below 0x20 (the "has less"
// test) and none is above 0x7E (the "has more" test).
func printableRun(p []byte, i int) int {
	for i+8 <= len(p) {
		x := binary.LittleEndian.Uint64(p[i:])
		less := (x - ones*0x20) &^ x & highs
		more := ((x + ones*(0x7F-0x7E)) | x) & highs
		if less|more != 0 {
			break
		}
		i += 8
	}
	for i < len(p) && p[i]-0x20 < 0x7F-0x20 {
		i++
	}
	return i
}

// asciiRun returns the index of the first byte at or after i in p that is LF
// or not ASCII, or len(p), eight bytes at a time like printableRun.
func asciiRun(p []byte, i int) int {
	for i+8 <= len(p) {
		x := binary.LittleEndian.Uint64(p[i:])
		y := x ^ (ones * '\n')
		if (x|(y-ones)&^y)&highs != 0 {
			break
		}
		i += 8
	}
	for i < len(p) && p[i] < utf8.RuneSelf && p[i] != '\n' {
		i++
	}
	return i
}
