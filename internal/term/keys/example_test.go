package keys_test

import (
	"bytes"
	"fmt"

	"github.com/conchsh/conch/internal/term/keys"
)

func ExampleEncode() {
	// Literal hi, hex 0d, 0x0a and an invalid zz, then the key Enter.
	parts, warnings := keys.Encode("hi", []string{"0d", "0x0a", "zz"}, []string{"Enter"}, keys.Modes{})
	fmt.Printf("%q\n", bytes.Join(parts, nil))
	fmt.Println(len(parts), "parts")
	fmt.Println(warnings)

	parts, warnings = keys.Encode("", nil, []string{"C-c", "M-x", "C-Up", "C-foo"}, keys.Modes{})
	fmt.Printf("%q %q\n", parts, warnings)
	// Output:
	// "hi\r\n\r"
	// 4 parts
	// [Invalid hex byte: zz]
	// ["\x03" "\x1bx" "\x1b[1;5A" "foo"] ["Unknown key \"foo\" for modifiers; sending literal."]
}

func ExampleTracker() {
	var t keys.Tracker
	// A full-screen program starts: alternate screen, DECCKM, bracketed paste; the
	// sequence may arrive split across reads.
	t.Write([]byte("\x1b[?1049h\x1b[?1"))
	t.Write([]byte("h\x1b=\x1b[?2004h"))
	m := t.Modes()
	fmt.Printf("%+v\n", m)

	parts, _ := keys.Encode("", nil, []string{"Up"}, m)
	fmt.Printf("%q\n", parts[0])
	// Output:
	// {AppCursor:true BracketedPaste:true}
	// "\x1bOA"
}

func ExamplePaste() {
	on := keys.Modes{BracketedPaste: true}
	payload, warning := keys.Paste("echo hi\n", true, true, on)
	fmt.Printf("%q %q\n", payload, warning)

	payload, warning = keys.Paste("echo hi\n", true, true, keys.Modes{})
	fmt.Printf("%q %q\n", payload, warning)

	payload, warning = keys.Paste("a\x1b[201~b", true, false, on) // pipe session
	fmt.Printf("%q %q\n", payload, warning)
	// Output:
	// "\x1b[200~echo hi\n\x1b[201~" ""
	// "echo hi\n" "bracketed paste mode is off in the program; sent raw text."
	// "ab" ""
}
