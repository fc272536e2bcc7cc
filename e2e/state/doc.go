// Package state holds the end-to-end tests of conch's home: damaged and
// unwritable state, a full disk, the config file and its commands, systemd
// units. The harness is internal/testkit/e2etest.
package state
