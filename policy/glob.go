package policy

import "strings"

// MatchGlob reports whether the allowlist pattern matches the resolved
// executable path on a host whose file system tells case
// apart (Linux):
//
//   - Only patterns containing "/" or starting with "~" count; "\" is
//     normalised to "/". Bare names ("rg") match nothing.
//   - The pattern exactly "*" matches every non-empty path.
//   - A leading "~" or "~/" expands to home; with an empty home, or "~user",
//     the pattern matches nothing.
//   - Matching is on the full path and case-sensitive: "/x/bin/tool" does
//     not match the different file "/x/BIN/TOOL". "**" is any characters
//     including "/", "*" any characters except "/", "?" any one character
//     (including "/", as in OpenClaw); everything else is literal.
//
// [MatchGlobFold] is the same match for hosts whose file system folds
// case (macOS, Windows). The realpath rule (a pattern without
// wildcards also matches when its realpath equals the segment's) needs the
// filesystem and is applied by [Evaluate], not here.
func MatchGlob(pattern, path, home string) bool {
	return matchGlob(pattern, path, home, false)
}

// MatchGlobFold is [MatchGlob] ignoring case, for hosts whose file system
// folds case: there "/usr/bin/git" and "/USR/BIN/GIT" name one file.
func MatchGlobFold(pattern, path, home string) bool {
	return matchGlob(pattern, path, home, true)
}

func matchGlob(pattern, path, home string, fold bool) bool {
	p, ok := normalizePattern(pattern, home)
	if !ok || path == "" {
		return false
	}
	if p == "*" {
		return true
	}
	if fold {
		p, path = strings.ToLower(p), strings.ToLower(path)
	}
	return globMatch(p, path)
}

// normalizePattern trims, converts "\" to "/" and expands "~"; ok is false
// for patterns that never match.
func normalizePattern(pattern, home string) (string, bool) {
	p := strings.TrimSpace(pattern)
	if p == "*" {
		return p, true
	}
	p = strings.ReplaceAll(p, `\`, "/")
	switch {
	case p == "~":
		p = home
	case strings.HasPrefix(p, "~/"):
		if home == "" {
			return "", false
		}
		p = strings.TrimRight(home, "/") + p[1:]
	case strings.HasPrefix(p, "~"):
		return "", false // ~user is not supported
	case !strings.Contains(p, "/"):
		return "", false
	}
	return p, p != ""
}

// hasWildcard reports whether a normalised pattern has glob characters.
func hasWildcard(p string) bool { return strings.ContainsAny(p, "*?") }

// globMatch matches s against pat (both already case-folded when the host
// folds case) with the
// wildcards of MatchGlob, in O(len(pat)·len(s)) time.
func globMatch(pat, s string) bool {
	i := strings.IndexAny(pat, "*?")
	if i < 0 {
		return pat == s
	}
	// The literal text before the first and after the last wildcard must
	// be a prefix and a suffix of s.
	if !strings.HasPrefix(s, pat[:i]) {
		return false
	}
	j := strings.LastIndexAny(pat, "*?")
	if !strings.HasSuffix(s, pat[j+1:]) || len(s) < i+len(pat)-j-1 {
		return false
	}
	return globMatchUnits(pat, s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// globSlice matches pattern units against text units (bytes for ASCII
// text, runes otherwise) with the rules of MatchGlob, using a one-row
// dynamic program: cur[j] says the pattern so far matches text[:j]. cur
// and next are scratch rows of len(sr)+1.
func globSlice[T byte | rune](pr, sr []T, cur, next []bool) bool {
	n := len(sr)
	clear(cur)
	cur[0] = true
	for i := 0; i < len(pr); {
		clear(next)
		switch {
		case pr[i] == '*' && i+1 < len(pr) && pr[i+1] == '*':
			acc := false
			for j := 0; j <= n; j++ {
				acc = acc || cur[j]
				next[j] = acc
			}
			i += 2
		case pr[i] == '*':
			acc := false
			for j := 0; j <= n; j++ {
				if j > 0 && sr[j-1] == '/' {
					acc = false
				}
				acc = acc || cur[j]
				next[j] = acc
			}
			i++
		case pr[i] == '?':
			for j := 0; j < n; j++ {
				next[j+1] = cur[j]
			}
			i++
		default:
			c := pr[i]
			for j := 0; j < n; j++ {
				next[j+1] = cur[j] && sr[j] == c
			}
			i++
		}
		cur, next = next, cur
	}
	return cur[n]
}

// globMatchUnits runs globSlice on bytes when both strings are ASCII (no
// allocation for short paths), else on runes.
func globMatchUnits(pat, s string) bool {
	if isASCII(pat) && isASCII(s) {
		n := len(s) + 1
		var bufA, bufB [256]bool
		if n <= len(bufA) {
			return globSlice([]byte(pat), []byte(s), bufA[:n], bufB[:n])
		}
		return globSlice([]byte(pat), []byte(s), make([]bool, n), make([]bool, n))
	}
	pr, sr := []rune(pat), []rune(s)
	return globSlice(pr, sr, make([]bool, len(sr)+1), make([]bool, len(sr)+1))
}
