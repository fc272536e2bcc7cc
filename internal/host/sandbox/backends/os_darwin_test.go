package backends_test

// osBackends are the backends registered on this OS beside the portable
// ones: docker and Seatbelt on macOS (bwrap and Landlock need Linux).
var osBackends = []string{"docker", "seatbelt"}
