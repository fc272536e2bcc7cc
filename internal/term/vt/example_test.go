package vt_test

import (
	"fmt"

	"github.com/conchsh/conch/internal/term/vt"
)

func Example() {
	term := vt.New(40, 5)
	defer term.Close()
	// A progress line redrawn in place, then a cursor position query.
	term.Write([]byte("build\r\n50%\r100%\x1b[K\r\ndone\x1b[6n"))
	s := term.Snapshot()
	fmt.Printf("%q\n", s.Lines[:3])
	fmt.Printf("cursor %d,%d\n", s.CursorRow, s.CursorCol)
	fmt.Printf("reply %q\n", <-term.Replies())
	// Output:
	// ["build" "100%" "done"]
	// cursor 3,5
	// reply "\x1b[3;5R"
}

func ExampleReplay() {
	s := vt.Replay(20, 3, []byte("\x1b]2;editor\x07\x1b[?1049h\x1b[2;3Hhello"))
	fmt.Println(s.Title, s.AltScreen, s.CursorRow, s.CursorCol)
	fmt.Printf("%q\n", s.Lines)
	// Output:
	// editor true 2 8
	// ["" "  hello" ""]
}
