package backends_test

// osBackends are the backends registered on this OS.
var osBackends = []string{"docker", "bwrap", "landlock"}
