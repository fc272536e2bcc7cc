package backends_test

// osBackends are the backends registered on this OS: none on Windows
// (see the package doc).
var osBackends = []string{}
