package shellenv

import (
	"strings"
)

// MergePATH puts the login PATH's entries first, then the existing ones,
// de-duplicated by exact string.
func MergePATH(loginPath, path string) string { return MergePATHList(loginPath, path, ":") }

// MergePATHList is MergePATH for PATHs whose entries sep separates (";"
// on Windows).
func MergePATHList(loginPath, path, sep string) string {
	seen := map[string]bool{}
	var out []string
	for _, p := range append(strings.Split(loginPath, sep), strings.Split(path, sep)...) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
