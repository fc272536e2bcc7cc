package shim

// exeSuffix ends the file name of a program on Windows (conch-shim.exe
// beside conch.exe). The shim cache is not used there: its key is the
// ELF build id, which a Windows binary does not have. Not yet run on
// Windows.
const exeSuffix = ".exe"
