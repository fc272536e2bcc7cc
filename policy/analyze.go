package policy

import (
	"errors"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Analysis failure reasons that are not "unsupported shell construct: …".
const (
	reasonInvalidChar      = "invalid character"
	reasonControlChar      = "control character (only tab and newline are accepted)"
	reasonContinuation     = "line continuation"
	reasonEmpty            = "empty command"
	reasonTooLong          = "command longer than 131071 bytes"
	reasonHeredocSubst     = "command substitution in unquoted heredoc"
	reasonHeredocUnclosed  = "unterminated heredoc"
	unsupportedPrefix      = "unsupported shell construct: "
	parseErrorPrefix       = "parse error: "
	constructNewline       = "newline"
	constructNonLiteralCmd = "non-literal command name"
)

// word is one shell word of a simple command.
type word struct {
	src   string   // source text as written
	val   string   // value after quote removal; meaningful when lit (or tilde for a command)
	lit   bool     // contains no expansion of any kind (parameter, glob, brace, tilde)
	tilde bool     // starts with an unquoted "~" and has no other expansion
	zsh   *failure // an unquoted zsh parameter flag ($~X): fails the analysis
}

// command reports whether the word may name a command: literal, or a
// leading "~" or "~/" and otherwise literal.
func (w word) command() bool {
	return w.lit || w.tilde && (w.val == "~" || strings.HasPrefix(w.val, "~/"))
}

// arg returns the word as shown in Segment.Argv.
func (w word) arg() string {
	if w.lit {
		return w.val
	}
	return w.src
}

// command is one accepted simple command.
type command struct {
	words   []word
	text    string
	heredoc bool
}

// analysis is an Analysis plus what Evaluate needs from the syntax tree.
type analysis struct {
	Analysis
	cmds [][]*command // parallel to Parts[i].Segments
}

// failure is an analysis failure at a position.
type failure struct {
	reason string
	pos    syntax.Pos
	off    int // byte offset when pos is not set; -1 for none
}

func unsupported(what string, pos syntax.Pos) *failure {
	return &failure{reason: unsupportedPrefix + what, pos: pos, off: -1}
}

// MaxCommandBytes is the longest command the analysis parses; longer ones
// fail it (reasonTooLong). Linux refuses a longer argument anyway
// (MAX_ARG_STRLEN is 128 KiB with its NUL).
const MaxCommandBytes = 128<<10 - 1

var parserPool = sync.Pool{New: func() any {
	return syntax.NewParser(syntax.Variant(syntax.LangBash))
}}

// Analyze parses command as bash and checks that it only uses the accepted
// shapes: simple commands with a literal first word joined by ; && || and |,
// quotes, globs, simple $NAME expansions and heredocs. It touches no filesystem: the segments it returns have
// Text and Argv only. Anything it does not fully understand fails the
// analysis with OK false and a Reason.
func Analyze(command string) Analysis {
	return analyze(command).Analysis
}

func analyze(src string) *analysis {
	a := &analysis{}
	if f := precheck(src); f != nil {
		a.fail(src, f)
		return a
	}
	file, err := parse(src)
	if err != nil {
		a.fail(src, parseFailure(err))
		return a
	}
	if len(file.Stmts) == 0 {
		a.fail(src, &failure{reason: reasonEmpty, off: -1})
		return a
	}
	w := walker{src: src, a: a}
	for i, st := range file.Stmts {
		op := ""
		if i > 0 {
			op = ";"
		}
		if f := w.chain(st, op); f != nil {
			a.fail(src, f)
			return a
		}
	}
	if f := w.newlines(); f != nil {
		a.fail(src, f)
		return a
	}
	if n := a.segments(); n > MaxSegments {
		a.fail(src, &failure{reason: tooManySegments(n), off: -1})
		return a
	}
	a.OK = true
	return a
}

// MaxSegments bounds the simple commands of one command, the inline
// scripts of shell wrappers included: beyond it the command is not
// satisfied (its analysis fails, or the wrapper's segment is a miss), so
// that one request cannot make the gate resolve and judge thousands of
// executables.
const MaxSegments = 256

func tooManySegments(n int) string {
	return "too many segments: " + strconv.Itoa(n) + " (the limit is " + strconv.Itoa(MaxSegments) + ")"
}

// segments counts the simple commands of the analysis.
func (a *analysis) segments() int {
	n := 0
	for _, p := range a.Parts {
		n += len(p.Segments)
	}
	return n
}

// parse parses src as bash. A panic in the parser is turned into an error
// (and the parser is not reused), so that analysis fails closed.
func parse(src string) (file *syntax.File, err error) {
	p := parserPool.Get().(*syntax.Parser)
	defer func() {
		if r := recover(); r != nil {
			file, err = nil, errors.New("internal parser error")
		}
	}()
	file, err = p.Parse(strings.NewReader(src), "")
	parserPool.Put(p)
	return file, err
}

func (a *analysis) fail(src string, f *failure) {
	a.OK = false
	a.Reason = f.reason
	a.Parts, a.cmds, a.Heredoc = nil, nil, false
	switch {
	case f.pos.IsValid():
		a.Pos = f.pos.String()
	case f.off >= 0:
		a.Pos = posAt(src, f.off)
	}
}

// precheck rejects what the parser would silently accept or lose: NUL
// bytes, line continuations (the parser drops them from literals) and
// commands with nothing to run.
func precheck(src string) *failure {
	if len(src) > MaxCommandBytes {
		// The parser recurses once per nesting level: a bound on the
		// length bounds its stack (a few megabytes of nested $( would
		// overflow it, which no recover catches).
		return &failure{reason: reasonTooLong + " (it is " + strconv.Itoa(len(src)) + ")", off: -1}
	}
	if i := strings.IndexByte(src, 0); i >= 0 {
		return &failure{reason: reasonInvalidChar, off: i}
	}
	// The parser and the shells disagree on control characters: the
	// parser reads a carriage return as a blank, bash as part of a word,
	// so in `echo a<CR>#; touch x` the parser saw a comment where bash
	// ran touch. Only tab and newline are read the same way by all.
	for i := 0; i < len(src); i++ {
		if c := src[i]; (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f {
			return &failure{reason: reasonControlChar, off: i}
		}
	}
	for i := strings.IndexByte(src, '\\'); i >= 0 && i < len(src)-1; {
		rest := src[i+1:]
		if rest[0] == '\n' || strings.HasPrefix(rest, "\r\n") {
			return &failure{reason: reasonContinuation, off: i}
		}
		j := strings.IndexByte(rest, '\\')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if strings.TrimSpace(src) == "" {
		return &failure{reason: reasonEmpty, off: -1}
	}
	return nil
}

func parseFailure(err error) *failure {
	var pe syntax.ParseError
	if errors.As(err, &pe) {
		if strings.HasPrefix(pe.Text, "unclosed here-document") {
			return &failure{reason: reasonHeredocUnclosed, pos: pe.Pos, off: -1}
		}
		return &failure{reason: parseErrorPrefix + pe.Text, pos: pe.Pos, off: -1}
	}
	var le syntax.LangError
	if errors.As(err, &le) {
		return &failure{reason: parseErrorPrefix + le.Feature + " not supported in bash", pos: le.Pos, off: -1}
	}
	return &failure{reason: parseErrorPrefix + err.Error(), off: -1}
}

// posAt returns the "line:col" of byte offset off, as syntax.Pos prints it.
func posAt(src string, off int) string {
	line, col := 1, 1
	for i := 0; i < off && i < len(src); i++ {
		if src[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return strconv.Itoa(line) + ":" + strconv.Itoa(col)
}

type span struct{ start, end int }

// walker turns accepted statements into parts.
type walker struct {
	src          string
	a            *analysis
	words        []span // byte ranges of every word, heredoc bodies included
	hdocStart    []int  // offsets where heredoc bodies begin
	braceScanned int    // characters scanned by braceExpansion
}

func (w *walker) addPart(op string) {
	w.a.Parts = append(w.a.Parts, Part{Op: op})
	w.a.cmds = append(w.a.cmds, nil)
}

func (w *walker) addSegment(seg Segment, c *command) {
	i := len(w.a.Parts) - 1
	w.a.Parts[i].Segments = append(w.a.Parts[i].Segments, seg)
	w.a.cmds[i] = append(w.a.cmds[i], c)
}

// stmt checks the flags of a statement (not its command).
func (w *walker) stmt(st *syntax.Stmt, simple bool) *failure {
	switch {
	case st.Negated:
		return unsupported("negation (!)", st.Pos())
	case st.Coprocess:
		return unsupported("coprocess (|&)", st.Semicolon)
	case st.Background || st.Disown:
		return unsupported("background (&)", st.Semicolon)
	}
	if !simple && len(st.Redirs) > 0 {
		return redirFailure(st.Redirs[0])
	}
	return nil
}

func redirFailure(r *syntax.Redirect) *failure {
	if r.Op == syntax.WordHdoc {
		return unsupported("here-string (<<<)", r.Pos())
	}
	op := r.Op.String()
	if r.N != nil {
		op = r.N.Value + op
	}
	return unsupported("redirection ("+op+")", r.Pos())
}

// chain handles a statement of a chain: && and || split parts.
func (w *walker) chain(st *syntax.Stmt, op string) *failure {
	bin, ok := st.Cmd.(*syntax.BinaryCmd)
	if ok && (bin.Op == syntax.AndStmt || bin.Op == syntax.OrStmt) {
		if f := w.stmt(st, false); f != nil {
			return f
		}
		if f := w.chain(bin.X, op); f != nil {
			return f
		}
		return w.chain(bin.Y, bin.Op.String())
	}
	w.addPart(op)
	return w.pipeline(st)
}

// pipeline handles one part: | splits segments.
func (w *walker) pipeline(st *syntax.Stmt) *failure {
	switch c := st.Cmd.(type) {
	case *syntax.BinaryCmd:
		if f := w.stmt(st, false); f != nil {
			return f
		}
		switch c.Op {
		case syntax.Pipe:
			if f := w.pipeline(c.X); f != nil {
				return f
			}
			return w.pipeline(c.Y)
		case syntax.PipeAll:
			return unsupported("pipe with stderr (|&)", c.OpPos)
		}
		// && or || inside a pipeline cannot be written without grouping.
		return unsupported("nested chain ("+c.Op.String()+")", c.OpPos)
	case *syntax.CallExpr:
		if f := w.stmt(st, true); f != nil {
			return f
		}
		return w.call(st, c)
	case nil:
		if len(st.Redirs) > 0 {
			return redirFailure(st.Redirs[0])
		}
		return unsupported("empty statement", st.Pos())
	}
	return unsupported(compoundName(st.Cmd), st.Cmd.Pos())
}

func compoundName(c syntax.Command) string {
	switch c := c.(type) {
	case *syntax.Subshell:
		return "subshell ( … )"
	case *syntax.Block:
		return "group { …; }"
	case *syntax.IfClause:
		return "compound command (if)"
	case *syntax.WhileClause:
		if c.Until {
			return "compound command (until)"
		}
		return "compound command (while)"
	case *syntax.ForClause:
		if c.Select {
			return "compound command (select)"
		}
		return "compound command (for)"
	case *syntax.CaseClause:
		return "compound command (case)"
	case *syntax.FuncDecl:
		return "function definition"
	case *syntax.ArithmCmd:
		return "arithmetic ((( … )))"
	case *syntax.TestClause:
		return "test expression ([[ … ]])"
	case *syntax.DeclClause:
		name := "declare"
		if c.Variant != nil {
			name = c.Variant.Value
		}
		return "declaration (" + name + ")"
	case *syntax.LetClause:
		return "let"
	case *syntax.TimeClause:
		return "time"
	case *syntax.CoprocClause:
		return "coprocess (coproc)"
	case *syntax.TestDecl:
		return "test declaration"
	}
	return "command"
}

// call handles one simple command.
func (w *walker) call(st *syntax.Stmt, c *syntax.CallExpr) *failure {
	if len(c.Assigns) > 0 {
		as := c.Assigns[0]
		name := "…"
		if as.Name != nil {
			name = as.Name.Value
		}
		if len(c.Args) == 0 {
			return unsupported("assignment ("+name+"=…)", as.Pos())
		}
		return unsupported("env-prefix assignment ("+name+"=…)", as.Pos())
	}
	if len(c.Args) == 0 {
		return unsupported("empty command", st.Pos())
	}
	cmd := &command{}
	start, end := int(c.Pos().Offset()), int(c.End().Offset())
	for i, wd := range c.Args {
		x, f := w.word(wd)
		if f != nil {
			return f
		}
		if i == 0 {
			if f := commandWord(wd, x); f != nil {
				return f
			}
		}
		if x.zsh != nil {
			return x.zsh
		}
		cmd.words = append(cmd.words, x)
	}
	for _, r := range st.Redirs {
		if r.Op != syntax.Hdoc && r.Op != syntax.DashHdoc {
			return redirFailure(r)
		}
		if f := w.heredoc(r); f != nil {
			return f
		}
		cmd.heredoc = true
		w.a.Heredoc = true
		if s := int(r.Pos().Offset()); s < start {
			start = s
		}
		if e := int(r.Word.End().Offset()); e > end {
			end = e
		}
	}
	cmd.text = w.src[start:end]
	argv := make([]string, len(cmd.words))
	for i, x := range cmd.words {
		argv[i] = x.arg()
	}
	w.addSegment(Segment{Text: cmd.text, Argv: argv}, cmd)
	return nil
}

// commandWord checks the first word: literal text, quotes, escapes and a
// leading "~/" only.
func commandWord(wd *syntax.Word, x word) *failure {
	if x.command() {
		return nil
	}
	return unsupported(constructNonLiteralCmd+" ("+x.src+")", wd.Pos())
}

// unescapeLit removes backslash escapes from unquoted literal text and
// reports whether the text has an unescaped glob or tilde character, or a
// brace expansion: a "{" followed (in this part or a later part of the same
// word, see braceOpen) by an unescaped "," or "..". A lone "{}" is literal,
// as in bash. A "$" that bash leaves literal ("$=x", "$~x") counts as an
// expansion too: other shells (zsh) expand it.
func unescapeLit(v string, braceOpen *bool) (string, bool) {
	if !strings.ContainsAny(v, "\\*?[]{}~,.$") {
		return v, false
	}
	var b strings.Builder
	exp := false
	for j := 0; j < len(v); j++ {
		c := v[j]
		if c == '\\' {
			if j+1 < len(v) {
				j++
				b.WriteByte(v[j])
			} else {
				b.WriteByte(c)
			}
			continue
		}
		switch c {
		case '*', '?', '[', ']', '~', '$':
			exp = true
		case '{':
			*braceOpen = true
		case ',':
			exp = exp || *braceOpen
		case '.':
			exp = exp || *braceOpen && j+1 < len(v) && v[j+1] == '.'
		}
		b.WriteByte(c)
	}
	return b.String(), exp
}

// zshFlags follow an unquoted "$" that bash leaves literal but zsh reads
// as a parameter flag: `$~X` turns on GLOB_SUBST for X's value, so
// X='/(e:touch x:)' runs code through the e glob qualifier when the command
// runs under zsh (a zsh -f -c wrapper, or zsh as the user's shell).
const zshFlags = "~=^+"

// zshFlag fails the analysis for an unescaped "$" followed by a zsh
// parameter flag in the unquoted text of parts[i], the "$" possibly ending
// the literal before it (the parser splits "$~X" into "$" and "~X").
func zshFlag(parts []syntax.WordPart, i int) *failure {
	p := parts[i].(*syntax.Lit)
	v := p.Value
	if i > 0 && v != "" && strings.IndexByte(zshFlags, v[0]) >= 0 {
		if prev, ok := parts[i-1].(*syntax.Lit); ok && endsWithDollar(prev.Value) {
			return unsupported("zsh parameter flag ($"+v[:1]+"…)", prev.Pos())
		}
	}
	for j := 0; j+1 < len(v); j++ {
		switch {
		case v[j] == '\\':
			j++
		case v[j] == '$' && strings.IndexByte(zshFlags, v[j+1]) >= 0:
			return unsupported("zsh parameter flag ($"+v[j+1:j+2]+"…)", p.Pos())
		}
	}
	return nil
}

// endsWithDollar reports whether v ends with a "$" that no backslash
// escapes.
func endsWithDollar(v string) bool {
	if !strings.HasSuffix(v, "$") {
		return false
	}
	n := 0
	for j := len(v) - 2; j >= 0 && v[j] == '\\'; j-- {
		n++
	}
	return n%2 == 0
}

// unescapeDbl removes the escapes that are special inside double quotes.
func unescapeDbl(v string) string {
	if !strings.Contains(v, "\\") {
		return v
	}
	var b strings.Builder
	for j := 0; j < len(v); j++ {
		c := v[j]
		if c == '\\' && j+1 < len(v) {
			switch v[j+1] {
			case '$', '`', '"', '\\':
				j++
				b.WriteByte(v[j])
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// word checks a word for constructs that fail the analysis and computes its
// value.
func (w *walker) word(wd *syntax.Word) (word, *failure) {
	start, end := int(wd.Pos().Offset()), int(wd.End().Offset())
	w.words = append(w.words, span{start, end})
	x := word{src: w.src[start:end], lit: true}
	var b strings.Builder
	tilde, brace := false, false
	for i, part := range wd.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if f := zshFlag(wd.Parts, i); f != nil && x.zsh == nil {
				x.zsh = f // a command name fails as non-literal first
			}
			if i == 0 && strings.HasPrefix(v, "~") {
				tilde = true
				b.WriteByte('~')
				v = v[1:]
			}
			v, exp := unescapeLit(v, &brace)
			if exp {
				x.lit = false
			}
			b.WriteString(v)
		case *syntax.SglQuoted:
			if p.Dollar {
				return x, unsupported("ANSI-C quoting ($'…')", p.Pos())
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return x, unsupported(`locale quoting ($"…")`, p.Pos())
			}
			for qi, q := range p.Parts {
				switch q := q.(type) {
				case *syntax.Lit:
					v := unescapeDbl(q.Value)
					if strings.Contains(strings.ReplaceAll(q.Value, `\$`, ""), "$") {
						x.lit = false // a "$" bash leaves literal
					}
					b.WriteString(v)
				case *syntax.ParamExp:
					if f := checkParam(q); f != nil {
						return x, f
					}
					if f := zshSubscript(p.Parts, qi); f != nil {
						return x, f
					}
					x.lit = false
				default:
					return x, partFailure(q)
				}
			}
		case *syntax.ParamExp:
			if f := checkParam(p); f != nil {
				return x, f
			}
			if f := zshSubscript(wd.Parts, i); f != nil {
				return x, f
			}
			x.lit = false
		default:
			return x, partFailure(part)
		}
	}
	x.val = b.String()
	if tilde {
		x.tilde = x.lit
		x.lit = false
	}
	e := expansion{words: 1, bytes: uint64(len(x.src)) + 1}
	if brace {
		e = braceExpansion(w.src, wd, &w.braceScanned)
		if e.punct {
			return x, unsupported("brace sequence through [ \\ ] ^ _ ` ({Z..a})", wd.Pos())
		}
	}
	total := &w.a.Expanded
	total.Words = satAdd(total.Words, e.words)
	total.Bytes = satAdd(total.Bytes, e.bytes)
	if e.unbounded || total.Words > MaxExpandedWords || total.Bytes > MaxExpandedBytes {
		return x, &failure{reason: tooLarge(e.unbounded, *total), pos: wd.Pos(), off: -1}
	}
	return x, nil
}

func partFailure(part syntax.WordPart) *failure {
	switch p := part.(type) {
	case *syntax.CmdSubst:
		if p.Backquotes {
			return unsupported("command substitution (`…`)", p.Pos())
		}
		return unsupported("command substitution ($(…))", p.Pos())
	case *syntax.ProcSubst:
		return unsupported("process substitution ("+p.Op.String()+"…))", p.Pos())
	case *syntax.ArithmExp:
		return unsupported("arithmetic ($((…)))", p.Pos())
	case *syntax.ExtGlob:
		return unsupported("extended glob ("+p.Op.String()+"…))", p.Pos())
	case *syntax.ParamExp:
		return checkParam(p)
	}
	return unsupported("word part", part.Pos())
}

// checkParam accepts $NAME and ${NAME} only.
// zshSubscript fails the analysis for a $NAME (without braces) directly
// followed by "[": bash reads "$HOME[X]" as $HOME and the text "[X]", but
// zsh, unquoted or in double quotes, as a subscript it evaluates as
// arithmetic, and arithmetic on a variable whose value is
// 'HOME[$(cmd)]' runs cmd. X comes from the request's environment.
// "${HOME}[X]" is the same to bash and literal to zsh.
func zshSubscript(parts []syntax.WordPart, i int) *failure {
	p, ok := parts[i].(*syntax.ParamExp)
	if !ok || !p.Short || i+1 >= len(parts) {
		return nil
	}
	if next, ok := parts[i+1].(*syntax.Lit); ok && strings.HasPrefix(next.Value, "[") {
		return unsupported("zsh subscript ($"+p.Param.Value+"[…]; write ${"+p.Param.Value+"}[…])", next.Pos())
	}
	return nil
}

func checkParam(p *syntax.ParamExp) *failure {
	if p.Param == nil || p.Flags != nil || p.Excl || p.Length || p.Width || p.IsSet ||
		p.Split != syntax.OptUnset || p.GlobSubst != syntax.OptUnset || p.RcExpand != syntax.OptUnset ||
		p.NestedParam != nil || p.Index != nil || len(p.Modifiers) > 0 || p.Slice != nil ||
		p.Repl != nil || p.Names != 0 || p.Exp != nil {
		return unsupported("parameter expansion with operators (${…})", p.Pos())
	}
	if !isName(p.Param.Value) {
		return unsupported("special parameter ($"+p.Param.Value+")", p.Pos())
	}
	return nil
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// heredoc checks a << or <<- redirection: a literal delimiter, a body, and
// in an unquoted body only literal text and $NAME.
func (w *walker) heredoc(r *syntax.Redirect) *failure {
	quoted := false
	for _, part := range r.Word.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if strings.Contains(p.Value, `\`) {
				quoted = true
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return unsupported("ANSI-C quoting ($'…')", p.Pos())
			}
			quoted = true
		case *syntax.DblQuoted:
			if p.Dollar {
				return unsupported(`locale quoting ($"…")`, p.Pos())
			}
			for _, q := range p.Parts {
				if _, ok := q.(*syntax.Lit); !ok {
					return unsupported("non-literal heredoc delimiter", q.Pos())
				}
			}
			quoted = true
		default:
			return unsupported("non-literal heredoc delimiter", part.Pos())
		}
	}
	w.words = append(w.words, span{int(r.Word.Pos().Offset()), int(r.Word.End().Offset())})
	if r.Hdoc == nil || len(r.Hdoc.Parts) == 0 {
		return unsupported("empty heredoc", r.Pos())
	}
	start, end := int(r.Hdoc.Pos().Offset()), int(r.Hdoc.End().Offset())
	w.words = append(w.words, span{start, end})
	w.hdocStart = append(w.hdocStart, start)
	for _, part := range r.Hdoc.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
		case *syntax.ParamExp:
			if quoted || !p.Short || checkParam(p) != nil {
				return &failure{reason: reasonHeredocSubst, pos: p.Pos(), off: -1}
			}
		default:
			if quoted {
				return unsupported("heredoc body", part.Pos())
			}
			return &failure{reason: reasonHeredocSubst, pos: part.Pos(), off: -1}
		}
	}
	return nil
}

// newlines rejects every newline that is not inside a word (quotes,
// heredoc bodies), not leading or trailing, and does not start a heredoc
// body: such a newline separates commands.
func (w *walker) newlines() *failure {
	src := w.src
	first := len(src) - len(strings.TrimLeft(src, " \t\r\n"))
	last := len(strings.TrimRight(src, " \t\r\n"))
	for i := strings.IndexByte(src, '\n'); i >= 0; {
		if i > first && i < last && !w.inWord(i) && !w.startsBody(i+1) {
			return unsupported(constructNewline, syntax.Pos{}).at(i)
		}
		j := strings.IndexByte(src[i+1:], '\n')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return nil
}

func (f *failure) at(off int) *failure {
	f.off = off
	return f
}

func (w *walker) inWord(off int) bool {
	for _, s := range w.words {
		if off >= s.start && off < s.end {
			return true
		}
	}
	return false
}

func (w *walker) startsBody(off int) bool {
	for _, s := range w.hdocStart {
		if s == off {
			return true
		}
	}
	return false
}
