// Package render turns the raw bytes a process wrote to a terminal or a pipe
// into text an agent can read.
//
// A [Renderer] consumes raw output bytes in chunks split anywhere and emits
// rendered [Line]s, each tagged with the raw byte cursors it came from. The
// rules, applied in this order:
//
//  1. UTF-8 is decoded; every byte that is not part of a valid sequence
//     becomes one U+FFFD. Unicode format characters (category Cf: U+00AD,
//     U+200B–U+200F, U+202A–U+202E, U+2060–U+206F, U+FEFF, …) are removed.
//     Note that this removes ZERO WIDTH JOINER too, so emoji sequences joined
//     by it fall apart into their parts.
//  2. Terminal escapes are removed completely by the DEC VT500 / ECMA-48
//     parser of github.com/charmbracelet/x/ansi, held to ECMA-48 where that
//     parser is lenient (malformed CSIs are ignored to their final byte, C0
//     controls inside a sequence act without ending it): CSI (ESC [ or U+009B) with private
//     markers, parameters and intermediates; OSC (ESC ] or U+009D) ended by
//     BEL or ST (ESC \ or U+009C); DCS, SOS, PM and APC strings (ESC P, ESC X,
//     ESC ^, ESC _ or U+0090, U+0098, U+009E, U+009F) ended by ST; SS2/SS3
//     (ESC N, ESC O) together with the character they apply to; and every
//     other ESC sequence (ESC 7, ESC =, ESC ( B …) with its intermediates and
//     final byte. CAN and SUB abort a sequence. Other C1 controls
//     (U+0080–U+009F) are dropped. As in a terminal, LF, CR, BS and TAB inside
//     a CSI or ESC sequence take effect, and an unterminated string sequence
//     hides everything up to its terminator.
//  3. C0 controls other than TAB, LF and CR are dropped, and DEL too. BS
//     deletes the character before the cursor on the current line, if any
//     ("abc\b\bd" renders "ad"); when the cursor is inside the line (after a
//     CR) BS only moves it left, so the next character overwrites, as in a
//     terminal ("abcd\rxy\bz" renders "xzcd").
//  4. Progress collapse. A bare CR moves the cursor to the start of the line;
//     characters written after it overwrite the line one character at a time
//     and characters not overwritten remain ("abc\rX" renders "Xbc",
//     "50%\r100%" renders "100%"). A CR directly before LF, or at the end of
//     the input, has no effect, so CRLF is LF. Two CSI sequences that
//     progress displays use to redraw a line also act on the line (they are
//     still removed from the text): CHA to column 1 (ESC [ G, ESC [ 1 G) acts
//     as CR, and EL erases: ESC [ K to the end of the line, ESC [ 1 K the text
//     before the cursor, ESC [ 2 K the whole line.
//  5. Repeat folding is a separate, optional step ([Folder], [Fold]): in a run
//     of identical consecutive lines the first is kept and two or more further
//     copies are replaced by the line "[previous line repeated <N> times]".
//
// With [Options].Raw only step 1 applies: escapes, controls and CRs are kept.
//
// Lines are split on LF. A line whose rendered text would grow beyond
// [Options].MaxLineBytes bytes (default 1 MiB) is broken before the character
// that does not fit, as if an LF came before it, so a Renderer holds at most
// about two lines' worth of memory whatever the input.
//
// The helpers [Truncate] and [HeadTail] cap long outputs around the marker
// "[… <N> chars omitted; full output: process log sessionId=<id> since=<C> …]",
// cutting the head and the tail at line boundaries when one is near and
// inside a line otherwise; [CutHead] and [CutTail] apply the same rule to
// reads of the two ends of an output too large to render whole;
// [Tail], [MiddleTruncate] and [Snippet] shorten text for results, session
// lists and notifications. Lengths are always counted in code points.
package render
