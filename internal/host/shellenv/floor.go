package shellenv

import (
	"os"
	"runtime"
	"strings"
)

// The minimal PATH of host commands. A daemon started by a service
// manager (launchd, systemd, a container's init) often has a bare PATH,
// and commands would then miss the system's tools; every host command
// gets each entry of the floor its PATH lacks, after the entries it has.
// Windows has none: its PATH comes from the registry, whole.
var pathFloors = map[string][]string{
	"darwin": {"/opt/homebrew/bin", "/usr/local/bin", "/usr/bin", "/bin"},
	"linux":  {"/usr/local/bin", "/usr/bin", "/bin"},
}

// PathFloor is the minimal PATH on goos (a GOOS value), or nil.
func PathFloor(goos string) []string { return pathFloors[goos] }

// WithFloor returns path with every entry of goos's floor it lacks
// appended, in the floor's order; the entries path has keep their
// places. An empty path becomes the floor.
func WithFloor(goos, path string) string {
	floor := PathFloor(goos)
	if len(floor) == 0 {
		return path
	}
	have := map[string]bool{}
	for _, p := range strings.Split(path, ":") {
		have[p] = true
	}
	out := path
	for _, f := range floor {
		if have[f] {
			continue
		}
		if out != "" {
			out += ":"
		}
		out += f
	}
	return out
}

// DaemonPATH is this process's PATH with the floor of its OS applied: the
// PATH host commands start from.
func DaemonPATH() string { return WithFloor(runtime.GOOS, os.Getenv("PATH")) }

// NodeOverrides returns the env overrides a node run on goos applies to
// its command. A macOS node discards a PATH override (in any letter case)
// entirely, as the nodes of the system conch reimplements do: the
// node's own PATH is its service's. Elsewhere the overrides are returned
// as they are, and Validate refuses a PATH among them (conch's nodes on
// Linux refuse it rather than accept a prepended PATH). dropped reports
// whether a PATH was discarded. env is not changed.
func NodeOverrides(goos string, env map[string]string) (out map[string]string, dropped bool) {
	if goos != "darwin" {
		return env, false
	}
	for k := range env {
		if strings.EqualFold(k, "PATH") {
			dropped = true
		}
	}
	if !dropped {
		return env, false
	}
	out = make(map[string]string, len(env))
	for k, v := range env {
		if !strings.EqualFold(k, "PATH") {
			out[k] = v
		}
	}
	return out, true
}
