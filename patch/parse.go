package patch

import (
	"fmt"
	"strings"
)

// Kind is the operation of a file hunk.
type Kind int

// The three file operations of the format.
const (
	Add Kind = iota + 1
	Delete
	Update
)

func (k Kind) String() string {
	switch k {
	case Add:
		return "add"
	case Delete:
		return "delete"
	case Update:
		return "update"
	}
	return "unknown"
}

// Patch is a parsed patch: its file operations in patch order.
type Patch struct {
	Files []File
}

// File is one file operation.
type File struct {
	Kind Kind
	// Path is the header's path as written (trimmed).
	Path string
	// MoveTo is the destination of an Update with "*** Move to:", or "".
	MoveTo string
	// Content is the new content of an Add: each "+" line followed by LF.
	Content string
	// Chunks are the changes of an Update, in patch order.
	Chunks []Chunk
	// Line is the 1-based line of the header in the (unwrapped) patch.
	Line int
}

// Chunk is one change of an Update.
type Chunk struct {
	// Anchor is the text after "@@ " ("" when absent or a bare "@@").
	Anchor string
	// Old are the context and removed lines, New the context and added
	// lines, both in patch order.
	Old, New []string
	// EOF is set by "*** End of File": the chunk is anchored at the end.
	EOF bool
}

const (
	beginMarker = "*** Begin Patch"
	endMarker   = "*** End Patch"
	addPrefix   = "*** Add File: "
	delPrefix   = "*** Delete File: "
	updPrefix   = "*** Update File: "
	movePrefix  = "*** Move to: "
	eofMarker   = "*** End of File"
)

// Parse parses a patch in the "*** Begin Patch" format. Errors are *Error
// with code invalid_patch and the line number of the offending line.
func Parse(input string) (*Patch, error) {
	lines := splitPatch(input)
	if len(lines) == 0 || strings.TrimSpace(input) == "" {
		return nil, errorf(CodeInvalidPatch, "Provide a patch input.")
	}
	if strings.TrimSpace(lines[0]) != beginMarker {
		return nil, errorf(CodeInvalidPatch, "The first line of the patch must be '%s'", beginMarker)
	}
	if len(lines) < 2 || strings.TrimSpace(lines[len(lines)-1]) != endMarker {
		return nil, errorf(CodeInvalidPatch, "The last line of the patch must be '%s'", endMarker)
	}
	p := &Patch{}
	body := lines[1 : len(lines)-1]
	for i := 0; i < len(body); {
		ln := i + 2 // 1-based line number of body[i] in the patch
		line := strings.TrimSpace(body[i])
		switch {
		case line == "":
			// Blank lines between operations are skipped.
			i++
		case hasHeader(line, addPrefix):
			f := File{Kind: Add, Path: headerPath(line, addPrefix), Line: ln}
			if f.Path == "" {
				return nil, badHeader(ln, body[i])
			}
			i++
			var b strings.Builder
			for i < len(body) && strings.HasPrefix(body[i], "+") {
				b.WriteString(body[i][1:])
				b.WriteByte('\n')
				i++
			}
			f.Content = b.String()
			p.Files = append(p.Files, f)
		case hasHeader(line, delPrefix):
			f := File{Kind: Delete, Path: headerPath(line, delPrefix), Line: ln}
			if f.Path == "" {
				return nil, badHeader(ln, body[i])
			}
			p.Files = append(p.Files, f)
			i++
		case hasHeader(line, updPrefix):
			f := File{Kind: Update, Path: headerPath(line, updPrefix), Line: ln}
			if f.Path == "" {
				return nil, badHeader(ln, body[i])
			}
			i++
			if i < len(body) && hasHeader(strings.TrimSpace(body[i]), movePrefix) {
				f.MoveTo = headerPath(strings.TrimSpace(body[i]), movePrefix)
				if f.MoveTo == "" {
					return nil, badLine(i+2, body[i])
				}
				i++
			}
			n, err := parseChunks(&f, body[i:], i+2)
			if err != nil {
				return nil, err
			}
			if len(f.Chunks) == 0 {
				return nil, errorf(CodeInvalidPatch, "Invalid patch hunk at line %d: Update file hunk for path '%s' is empty", ln, f.Path)
			}
			i += n
			p.Files = append(p.Files, f)
		default:
			return nil, badHeader(ln, body[i])
		}
	}
	if len(p.Files) == 0 {
		return nil, errorf(CodeInvalidPatch, "No files were modified.")
	}
	return p, nil
}

// hasHeader reports whether line is prefix followed by something; a bare
// "*** Delete File:" counts too (its empty path is reported).
func hasHeader(line, prefix string) bool {
	return strings.HasPrefix(line, prefix) || line == strings.TrimSpace(prefix)
}

func headerPath(line, prefix string) string {
	if line == strings.TrimSpace(prefix) {
		return ""
	}
	return strings.TrimSpace(line[len(prefix):])
}

// parseChunks reads the chunks of an Update from lines, the first of which
// is patch line first. It returns how many lines it consumed: it stops at
// a line starting with "***" (the next header) or at the end.
func parseChunks(f *File, lines []string, first int) (int, error) {
	i := 0
	for i < len(lines) {
		line := lines[i]
		if strings.HasPrefix(line, "***") && strings.TrimSpace(line) != eofMarker {
			break
		}
		if strings.TrimSpace(line) == "" && len(f.Chunks) > 0 {
			// Blank lines between chunks.
			i++
			continue
		}
		var c Chunk
		switch {
		case strings.TrimRight(line, " \t") == "@@":
			i++
		case strings.HasPrefix(line, "@@ "):
			c.Anchor = strings.TrimSpace(line[3:])
			i++
		case len(f.Chunks) > 0:
			// Later chunks must start with "@@".
			return 0, badLine(first+i, line)
		}
		n := 0
	scan:
		for i < len(lines) {
			l := lines[i]
			if strings.TrimSpace(l) == eofMarker {
				c.EOF = true
				i++
				break
			}
			switch {
			case l == "":
				c.Old = append(c.Old, "")
				c.New = append(c.New, "")
			case l[0] == ' ':
				c.Old = append(c.Old, l[1:])
				c.New = append(c.New, l[1:])
			case l[0] == '-':
				c.Old = append(c.Old, l[1:])
			case l[0] == '+':
				c.New = append(c.New, l[1:])
			default:
				if n == 0 {
					return 0, badLine(first+i, l)
				}
				break scan
			}
			n++
			i++
		}
		if n == 0 && !c.EOF {
			// "@@" followed by nothing usable.
			if i < len(lines) {
				return 0, badLine(first+i, lines[i])
			}
			return 0, errorf(CodeInvalidPatch, "Invalid patch hunk at line %d: Update file hunk for path '%s' is empty", f.Line, f.Path)
		}
		f.Chunks = append(f.Chunks, c)
	}
	return i, nil
}

func badHeader(n int, line string) error {
	return errorf(CodeInvalidPatch, "Invalid patch hunk at line %d: '%s' is not a valid hunk header. Valid hunk headers: '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'", n, line)
}

func badLine(n int, line string) error {
	return errorf(CodeInvalidPatch, "Invalid patch hunk at line %d: '%s' must start with ' ' (context), '+' (added) or '-' (removed)", n, line)
}

// splitPatch normalises line endings, trims, unwraps the lenient heredoc
// wrapper and splits into lines.
func splitPatch(input string) []string {
	s := strings.TrimSpace(strings.ReplaceAll(input, "\r\n", "\n"))
	lines := strings.Split(s, "\n")
	if len(lines) >= 2 {
		first := strings.TrimSpace(lines[0])
		last := strings.TrimSpace(lines[len(lines)-1])
		if (first == "<<EOF" || first == "<<'EOF'" || first == `<<"EOF"`) && last == "EOF" {
			s = strings.TrimSpace(strings.Join(lines[1:len(lines)-1], "\n"))
			lines = strings.Split(s, "\n")
		}
	}
	if s == "" {
		return nil
	}
	return lines
}

// Error is a failure with one of the codes (invalid_patch,
// context_not_found, path_outside_workspace, unavailable, io_error) and the
// exact message the tool returns.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Error codes.
const (
	CodeInvalidPatch = "invalid_patch"
	CodeContext      = "context_not_found"
	CodeOutside      = "path_outside_workspace"
	CodeUnavailable  = "unavailable"
	CodeIO           = "io_error"
	CodeAborted      = "aborted"
)

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
