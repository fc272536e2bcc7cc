package backends_test

// osBackends are the backends registered on this OS: docker only on
// macOS (Seatbelt is planned; bwrap and Landlock need Linux).
var osBackends = []string{"docker"}
