package journal_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/conchsh/conch/internal/session/journal"
)

func ExampleCreate() {
	home, err := os.MkdirTemp("", "conch")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)
	dir := filepath.Join(home, "sessions", "s1") // a session keeps its journal in its directory

	w, err := journal.Create(dir, journal.Options{})
	if err != nil {
		log.Fatal(err)
	}
	w.Append(journal.Stdout, []byte("building...\n"))
	w.AppendInput([]byte("y\n"))
	end, _ := w.Append(journal.Stderr, []byte("warning: deprecated\n"))
	fmt.Println("cursor:", end)
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	info, err := journal.Stat(dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("end:", info.End, "dropped:", info.DroppedBytes)
	// Output:
	// cursor: 32
	// end: 32 dropped: 0
}

func ExampleRead() {
	dir, err := os.MkdirTemp("", "journal")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w, err := journal.Create(dir, journal.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	w.Append(journal.Stdout, []byte("hello\n"))
	w.Append(journal.Stderr, []byte("oops\n"))

	// A poller keeps the returned cursor and reads from it next time.
	cursor, err := journal.Read(dir, 3, func(c journal.Chunk) error {
		fmt.Printf("%d %v %q\n", c.Cursor, c.Stream, c.Data)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next since:", cursor)

	w.Append(journal.Stdout, []byte("bye\n"))
	journal.Read(dir, cursor, func(c journal.Chunk) error {
		fmt.Printf("%d %v %q\n", c.Cursor, c.Stream, c.Data)
		return nil
	})
	// Output:
	// 3 stdout "lo\n"
	// 6 stderr "oops\n"
	// next since: 11
	// 11 stdout "bye\n"
}

func ExampleReadTail() {
	dir, err := os.MkdirTemp("", "journal")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w, err := journal.Create(dir, journal.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	w.Append(journal.Stdout, []byte("line 1\nline 2\nline 3\n"))

	start, end, err := journal.ReadTail(dir, 7, func(c journal.Chunk) error {
		fmt.Printf("%q\n", c.Data)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(start, end)
	// Output:
	// "line 3\n"
	// 14 21
}
