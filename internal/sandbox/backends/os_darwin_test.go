package backends_test

// osBackends are the backends registered only on this OS (bwrap and
// Landlock need Linux).
var osBackends = []string{"seatbelt"}
