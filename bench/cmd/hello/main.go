// Command hello is the baseline of conchbench's start step: the smallest
// Go program (it prints one line), so a program's start-up CPU is read
// as a ratio to the Go runtime's own.
package main

import (
	"fmt"
	"os"
)

func main() { fmt.Fprintln(os.Stdout, "hello") }
