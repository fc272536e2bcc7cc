package policy

import (
	"strings"
	"unicode/utf8"
)

// verdictColumn is the column (in runes) where the verdict mark starts.
const verdictColumn = 43

// Explain renders the decision as the `conch policy explain` tree.
// header is the first line (the effective policy with its
// sources), supplied by the caller; an empty header is omitted. The text
// ends with a newline.
func (d Decision) Explain(header string) string {
	var b strings.Builder
	if header != "" {
		b.WriteString(header)
		b.WriteByte('\n')
	}
	a := d.Analysis
	if !a.OK {
		b.WriteString("parse: failed — " + a.Reason)
		if a.Pos != "" {
			b.WriteString(" at " + a.Pos)
		}
		b.WriteByte('\n')
	} else {
		b.WriteString("parse: ok\nchain\n")
		writeParts(&b, a.Parts, "", "")
	}
	for _, w := range d.Warnings {
		b.WriteString(w + "\n")
	}
	b.WriteString("verdict: " + d.verdictText() + "\n")
	pinned := d.Pinned
	if pinned == "" {
		pinned = "—"
	}
	b.WriteString("pinned: " + pinned + "\n")
	list := "—"
	if len(d.Persist) > 0 {
		list = strings.Join(d.Persist, ", ")
	}
	b.WriteString("allow-always would persist: " + list + "\n")
	return b.String()
}

func (d Decision) verdictText() string {
	switch d.Outcome {
	case OutcomeRun:
		if d.Security == SecurityFull {
			return "run (security=full)"
		}
		return "run (every segment satisfied)"
	case OutcomeDeny:
		return "denied (" + d.Reason + ")"
	}
	if d.Ask == AskAlways {
		return "approval required (ask=always)"
	}
	var what []string
	if !d.Analysis.OK {
		what = append(what, "analysis failed")
	} else {
		var misses []string
		collectMisses(d.Analysis.Parts, "", &misses)
		if len(misses) > 0 {
			what = append(what, "miss in "+strings.Join(misses, ", "))
		}
		for _, w := range d.Warnings {
			if w == HeredocWarning {
				what = append(what, "heredoc")
			}
		}
	}
	return "approval required (ask=" + string(d.Ask) + "; " + strings.Join(what, "; ") + ")"
}

func collectMisses(parts []Part, prefix string, out *[]string) {
	for pi, p := range parts {
		for si, s := range p.Segments {
			if !satisfied(s.Verdict) {
				*out = append(*out, segIndex(prefix, pi, si, len(p.Segments)))
			}
		}
	}
}

// writeParts draws parts as a tree; indent is the prefix of every line,
// label the prefix of the numbers.
func writeParts(b *strings.Builder, parts []Part, indent, label string) {
	for pi, p := range parts {
		last := pi == len(parts)-1
		branch, cont := "├─ ", "│   "
		if last {
			branch, cont = "└─ ", "    "
		}
		if len(p.Segments) == 1 {
			idx := segIndex(label, pi, 0, 1)
			b.WriteString(indent + branch + "[" + idx + "] " + oneLine(p.Segments[0].Text) + "\n")
			writeSegment(b, p.Segments[0], indent, last, idx)
			continue
		}
		b.WriteString(indent + branch + "[" + segIndex(label, pi, 0, 1) + "] pipeline\n")
		for si, s := range p.Segments {
			sl := si == len(p.Segments)-1
			sb := "├─ "
			if sl {
				sb = "└─ "
			}
			idx := segIndex(label, pi, si, len(p.Segments))
			b.WriteString(indent + cont + sb + "[" + idx + "] " + oneLine(s.Text) + "\n")
			writeSegment(b, s, indent+cont, sl, idx)
		}
	}
}

// writeSegment draws the detail lines of a segment under its branch.
func writeSegment(b *strings.Builder, s Segment, indent string, last bool, idx string) {
	pre := indent + "│     "
	if last {
		pre = indent + "      "
	}
	exe := "exe " + s.Exe
	if s.Exe == "" {
		exe = "exe —"
	}
	line := pre + exe
	if pad := verdictColumn - utf8.RuneCountInString(line); pad > 0 {
		line += strings.Repeat(" ", pad)
	} else {
		line += " "
	}
	mark := "✗ "
	if satisfied(s.Verdict) {
		mark = "✓ "
	}
	v := s.Verdict
	if len(v) < 12 {
		v += strings.Repeat(" ", 12-len(v))
	} else {
		v += " "
	}
	rule := s.Rule
	if s.Verdict == VerdictAllowlist && s.Pattern != "" {
		rule = "rule " + s.Rule + ` "` + s.Pattern + `"`
	}
	b.WriteString(strings.TrimRight(line+mark+v+rule, " ") + "\n")
	if len(s.Wrappers) > 0 {
		b.WriteString(pre + "via " + strings.Join(s.Wrappers, ", ") + "\n")
	}
	if s.Script != "" {
		b.WriteString(pre + "script " + s.Script + "\n")
	}
	if len(s.Inner) > 0 {
		b.WriteString(pre + "inline script\n")
		writeParts(b, s.Inner, pre, idx+">")
	}
}

// oneLine keeps a segment text on one line of the tree.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\r") {
		return s
	}
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}
