package admin

import "io/fs"

// modeBits is false: Windows reports a fixed mode for every file (0666,
// 0444 when read-only; 0777 for a directory) and protects files with
// access lists, so Doctor neither checks nor fixes modes there. Not yet
// run on Windows.
const modeBits = false

// noModeBits is Doctor's finding in their place.
const noModeBits = "Windows: the home is protected by its access list (by default the user profile's: the user, SYSTEM and Administrators); " +
	"conch does not check it yet. Its sockets are bound in directories it makes private with a protected access list"

// fileOwner is not known: Windows files have an owner SID, not a uid.
func fileOwner(fi fs.FileInfo) (int, bool) { return 0, false }
