// Package patchgen generates files and equivalent edits in two formats:
// an apply_patch "*** Begin Patch" patch and a unified diff for git apply.
// Both are built from the same list of edits, independently of the patch
// package's code, so comparing what each tool makes of them tests the
// patch package against git. Used by patch's tests and by
// bench/cmd/patchbench.
package patchgen

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Edit replaces Del lines starting at Start (0-based) with Ins.
type Edit struct {
	Start, Del int
	Ins        []string
}

// Context is the number of context lines around each edit.
const Context = 3

// Lines returns n distinct lines of about width bytes (plus LF).
func Lines(r *rand.Rand, n, width int) []string {
	out := make([]string, n)
	const letters = "abcdefghijklmnopqrstuvwxyz      "
	for i := range out {
		var b strings.Builder
		fmt.Fprintf(&b, "%07d ", i)
		for b.Len() < width {
			b.WriteByte(letters[r.IntN(len(letters))])
		}
		out[i] = strings.TrimRight(b.String(), " ")
	}
	return out
}

// Edits returns up to k non-overlapping edits of lines, at least
// 2*Context+1 lines apart so that no two hunks share context.
func Edits(r *rand.Rand, lines []string, k int) []Edit {
	gap := 2*Context + 1
	var out []Edit
	pos := Context + r.IntN(gap)
	for len(out) < k && pos+Context < len(lines) {
		del := r.IntN(3)
		if pos+del+Context > len(lines) {
			break
		}
		ins := make([]string, r.IntN(3))
		if del == 0 && len(ins) == 0 {
			ins = append(ins, "")
		}
		for i := range ins {
			ins[i] = fmt.Sprintf("inserted %d.%d %x", len(out), i, r.Uint32())
		}
		out = append(out, Edit{Start: pos, Del: del, Ins: ins})
		pos += del + gap + r.IntN(len(lines)/max(k, 1)+1)
	}
	return out
}

// Apply returns lines with edits applied (the expected result).
func Apply(lines []string, edits []Edit) []string {
	var out []string
	at := 0
	for _, e := range edits {
		out = append(out, lines[at:e.Start]...)
		out = append(out, e.Ins...)
		at = e.Start + e.Del
	}
	return append(out, lines[at:]...)
}

// BeginPatch returns the edits of path as an apply_patch Update.
func BeginPatch(path string, lines []string, edits []Edit) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Update File: " + path + "\n")
	for _, e := range edits {
		b.WriteString("@@\n")
		from, to := max(0, e.Start-Context), min(len(lines), e.Start+e.Del+Context)
		for _, l := range lines[from:e.Start] {
			b.WriteString(" " + l + "\n")
		}
		for _, l := range lines[e.Start : e.Start+e.Del] {
			b.WriteString("-" + l + "\n")
		}
		for _, l := range e.Ins {
			b.WriteString("+" + l + "\n")
		}
		for _, l := range lines[e.Start+e.Del : to] {
			b.WriteString(" " + l + "\n")
		}
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// UnifiedDiff returns the same edits as a git unified diff of path.
func UnifiedDiff(path string, lines []string, edits []Edit) string {
	var b strings.Builder
	fmt.Fprintf(&b, "diff --git a/%s b/%s\n--- a/%s\n+++ b/%s\n", path, path, path, path)
	delta := 0
	for _, e := range edits {
		from, to := max(0, e.Start-Context), min(len(lines), e.Start+e.Del+Context)
		oldN := to - from
		newN := oldN - e.Del + len(e.Ins)
		oldStart, newStart := from+1, from+1+delta
		if oldN == 0 {
			oldStart--
		}
		if newN == 0 {
			newStart--
		}
		fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", oldStart, oldN, newStart, newN)
		for _, l := range lines[from:e.Start] {
			b.WriteString(" " + l + "\n")
		}
		for _, l := range lines[e.Start : e.Start+e.Del] {
			b.WriteString("-" + l + "\n")
		}
		for _, l := range e.Ins {
			b.WriteString("+" + l + "\n")
		}
		for _, l := range lines[e.Start+e.Del : to] {
			b.WriteString(" " + l + "\n")
		}
		delta += len(e.Ins) - e.Del
	}
	return b.String()
}

// Join returns lines as file content, each line ending in LF.
func Join(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}
