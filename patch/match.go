package patch

import "strings"

// The four matching passes, from strictest to
// loosest. Each pass scans the whole remaining range before the next one
// is tried, so an exact match later in the file wins over a loose one
// earlier.
var passes = [...]func(string) string{
	nil, // exact
	func(s string) string { return strings.TrimRight(s, " \t\r\n\v\f") },
	strings.TrimSpace,
	func(s string) string { return normalizePunct(strings.TrimSpace(s)) },
}

// seek returns the index of the first block of lines at or after start
// that equals pattern under the first pass that finds one, or -1. With
// eof, the block ending at the last line is tried first.
func seek(lines, pattern []string, start int, eof bool) int {
	if len(pattern) == 0 {
		return start
	}
	if len(pattern) > len(lines) {
		return -1
	}
	if eof {
		if at := len(lines) - len(pattern); at >= start {
			for _, norm := range passes {
				if equalAt(lines, pattern, at, norm) {
					return at
				}
			}
		}
	}
	for _, norm := range passes {
		if norm == nil {
			for i := start; i+len(pattern) <= len(lines); i++ {
				if equalAt(lines, pattern, i, nil) {
					return i
				}
			}
			continue
		}
		// Normalise the pattern once; lines are normalised on demand.
		np := make([]string, len(pattern))
		for j, p := range pattern {
			np[j] = norm(p)
		}
		for i := start; i+len(pattern) <= len(lines); i++ {
			ok := true
			for j := range np {
				if norm(lines[i+j]) != np[j] {
					ok = false
					break
				}
			}
			if ok {
				return i
			}
		}
	}
	return -1
}

func equalAt(lines, pattern []string, at int, norm func(string) string) bool {
	for j, p := range pattern {
		l := lines[at+j]
		if norm != nil {
			l, p = norm(l), norm(p)
		}
		if l != p {
			return false
		}
	}
	return true
}

// normalizePunct maps typographic dashes, quotes and spaces to their ASCII
// forms (the loosest pass).
func normalizePunct(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 0x2010 && r <= 0x2015, r == 0x2212:
			return '-'
		case r >= 0x2018 && r <= 0x201B:
			return '\''
		case r >= 0x201C && r <= 0x201F:
			return '"'
		case r == 0x00A0, r >= 0x2002 && r <= 0x200A, r == 0x202F, r == 0x205F, r == 0x3000:
			return ' '
		}
		return r
	}, s)
}
