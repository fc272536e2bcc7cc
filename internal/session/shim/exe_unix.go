//go:build unix

package shim

// exeSuffix ends the file name of a program: nothing on Unix.
const exeSuffix = ""
