package render_test

import (
	"fmt"
	"strings"

	"github.com/conchsh/conch/internal/term/render"
)

func ExampleRenderer() {
	// Output arrives in chunks split anywhere, here inside an escape
	// sequence and between CR and LF.
	chunks := []string{"\x1b[32mok\x1b[", "0m build\r", "\nDownloading  50%\r", "Downloading 100%\n", "tail"}
	r := render.New(0, render.Options{})
	show := func(l render.Line) { fmt.Printf("%d-%d %q partial=%v\n", l.Cursor, l.End, l.Text, l.Partial) }
	for _, c := range chunks {
		r.Write([]byte(c), show)
	}
	r.Flush(show)
	// Output:
	// 0-19 "ok build" partial=false
	// 19-53 "Downloading 100%" partial=false
	// 53-57 "tail" partial=true
}

func ExampleRenderer_Prime() {
	raw := []byte("\x1b[1;31mfailed\x1b[0m: 3 tests\n")
	// A read that starts at cursor 4, inside the colour code: priming with
	// the bytes before it makes the parser see the sequence's start.
	r := render.New(4, render.Options{})
	r.Prime(raw[:4])
	show := func(l render.Line) { fmt.Printf("%d %q\n", l.Cursor, l.Text) }
	r.Write(raw[4:], show)
	r.Flush(show)
	// Output:
	// 4 "failed: 3 tests"
}

func ExampleText() {
	fmt.Printf("%q\n", render.Text([]byte("\x1b]0;title\x07\x1b[1mbold\x1b[0m\r\nabc\rX\n")))
	// Output:
	// "bold\nXbc\n"
}

func ExampleFold() {
	fmt.Println(strings.Join(render.Fold([]string{"start", "retry", "retry", "retry", "retry", "done", "done"}), "\n"))
	// Output:
	// start
	// retry
	// [previous line repeated 3 times]
	// done
	// done
}

func ExampleHeadTail() {
	// Stream a large output through a Renderer, a Folder and a HeadTail;
	// only the head and the tail are kept in memory.
	h := render.NewHeadTail(60)
	var f render.Folder
	add := func(l render.Line) { h.Add(l) }
	fold := func(l render.Line) { f.Add(l, add) }
	r := render.New(0, render.Options{})
	for i := range 1000 {
		r.Write(fmt.Appendf(nil, "line %d\n", i), fold)
	}
	r.Flush(fold)
	f.Flush(add)
	e := h.Excerpt("s1")
	fmt.Println(e.Text)
	fmt.Println(e.Truncated, e.OmittedChars, e.OmitCursor)
	// Output:
	// line 0
	// line 1
	// [… 8831 chars omitted; full output: process log sessionId=s1 since=14 …]
	// line 995
	// line 996
	// line 997
	// line 998
	// line 999
	// true 8831 14
}

func ExampleTruncate() {
	lines := render.Lines([]byte("alpha\nbravo\ncharlie\ndelta\necho\n"), 0, render.Options{})
	e := render.Truncate(lines, 20, "s2")
	fmt.Println(e.Text)
	// Output:
	// alpha
	// [… 14 chars omitted; full output: process log sessionId=s2 since=6 …]
	// delta
	// echo
}

func ExampleSnippet() {
	fmt.Println(render.Snippet("Compiling...\n\n  warning: unused   variable\nBuild finished.\n"))
	// Output:
	// Compiling... warning: unused variable Build finished.
}

func ExampleMiddleTruncate() {
	fmt.Println(render.MiddleTruncate("/home/user/projects/conch/internal/render", 24))
	// Output:
	// /home/user...nal/render
}
