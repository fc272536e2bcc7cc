package backends_test

// osBackends are the backends registered only on this OS: none yet on
// macOS (Seatbelt is planned; bwrap and Landlock need Linux).
var osBackends = []string{}
