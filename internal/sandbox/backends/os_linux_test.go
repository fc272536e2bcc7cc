package backends_test

// osBackends are the backends registered only on this OS.
var osBackends = []string{"bwrap", "landlock"}
