package patch

import (
	"bytes"
	"strings"
)

// updateContent applies an Update's chunks to a file's content.
// path is the name used in error messages.
func updateContent(content []byte, chunks []Chunk, path string) ([]byte, error) {
	crlf := isCRLF(content)
	s := string(content)
	lines := strings.Split(s, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if crlf {
		for i, l := range lines {
			lines[i] = strings.TrimSuffix(l, "\r")
		}
	}
	type repl struct {
		at, n int
		with  []string
	}
	var rs []repl
	cursor := 0
	for _, c := range chunks {
		if c.Anchor != "" {
			at := seek(lines, []string{c.Anchor}, cursor, false)
			if at < 0 {
				return nil, errorf(CodeContext, "Failed to find context '%s' in %s", c.Anchor, path)
			}
			cursor = at + 1
		}
		if len(c.Old) == 0 {
			rs = append(rs, repl{at: len(lines), with: c.New})
			continue
		}
		old, neu := c.Old, c.New
		at := seek(lines, old, cursor, c.EOF)
		if at < 0 && old[len(old)-1] == "" {
			old = old[:len(old)-1]
			if len(neu) > 0 && neu[len(neu)-1] == "" {
				neu = neu[:len(neu)-1]
			}
			if len(old) > 0 {
				at = seek(lines, old, cursor, c.EOF)
			}
		}
		if at < 0 {
			return nil, errorf(CodeContext, "Failed to find expected lines in %s:\n%s", path, strings.Join(c.Old, "\n"))
		}
		rs = append(rs, repl{at: at, n: len(old), with: neu})
		cursor = at + len(old)
	}
	// Matches only move forward, so rs is sorted by position except for
	// pure additions (at the end); a stable sort keeps patch order among
	// equal positions. Apply from the last to the first.
	sortStable(len(rs), func(i, j int) bool { return rs[i].at < rs[j].at }, func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
	var out [][]string
	end := len(lines)
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		out = append(out, lines[r.at+r.n:end], r.with)
		end = r.at
	}
	out = append(out, lines[:end])
	eol := "\n"
	if crlf {
		eol = "\r\n"
	}
	var b bytes.Buffer
	b.Grow(len(content) + 64)
	for i := len(out) - 1; i >= 0; i-- {
		for _, l := range out[i] {
			b.WriteString(l)
			b.WriteString(eol)
		}
	}
	return b.Bytes(), nil
}

// isCRLF reports whether most lines of content end in CRLF.
func isCRLF(content []byte) bool {
	lf := bytes.Count(content, []byte("\n"))
	if lf == 0 {
		return false
	}
	crlf := bytes.Count(content, []byte("\r\n"))
	return crlf*2 > lf
}

// sortStable is an insertion sort: the input is nearly sorted.
func sortStable(n int, less func(i, j int) bool, swap func(i, j int)) {
	for i := 1; i < n; i++ {
		for j := i; j > 0 && less(j, j-1); j-- {
			swap(j, j-1)
		}
	}
}
