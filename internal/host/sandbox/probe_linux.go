package sandbox

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Wait probes (process wait until=port|http|file) of a sandboxed session
// must look at the sandbox's own network and filesystem, not the host's.
// For bwrap the engine finds a process inside the
// sandbox's namespaces and probes through them: files through
// /proc/<pid>/root, ports and URLs from a thread that joined the
// sandbox's network namespace (or, without the privilege for that, from
// the sandbox's socket table).

// InnerPID returns a pid among pids whose mount and user namespaces
// differ from this process's (a process inside a bwrap sandbox; a root
// gateway's staged bwrap has a mount namespace of its own but the host's
// user namespace), or 0.
func InnerPID(pids []int) int {
	selfMnt, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return 0
	}
	selfUser, _ := os.Readlink("/proc/self/ns/user")
	for _, pid := range pids {
		m, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		if err != nil || m == selfMnt {
			continue
		}
		if u, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", pid)); err == nil && u != selfUser {
			return pid
		}
	}
	return 0
}

// ProbeFile reports whether path (as seen inside, relative paths against
// cwd inside) exists in the sandbox of pid.
func ProbeFile(pid int, cwd, path string) bool {
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	// Resolve in the sandbox's root: through /proc/<pid>/root alone an
	// absolute symlink made inside would resolve against the host's /.
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// ProbeNet runs a port or http probe inside pid's network namespace.
// Joining it needs CAP_SYS_ADMIN (root); without it the probe reads the
// sandbox's socket table instead (/proc/<pid>/net/tcp, tcp6): the port
// (or the URL's port) must be listening on the address or a wildcard. No
// HTTP request is made then.
func ProbeNet(pid int, kind, arg string) bool {
	ok, err := inNetns(pid, func() bool { return ProbeDirect(kind, arg) })
	if err == nil {
		return ok
	}
	hostport := arg
	if kind == "http" {
		u, err := url.Parse(arg)
		if err != nil {
			return false
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		hostport = net.JoinHostPort(u.Hostname(), port)
	}
	return Listening(pid, hostport)
}

// Listening reports whether a TCP socket in pid's network namespace
// listens on hostport (or on the wildcard address of that port).
func Listening(pid int, hostport string) bool {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return false
	}
	if host == "" || host == "localhost" {
		host = "127.0.0.1"
	}
	want := net.ParseIP(host)
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || fs[3] != "0A" { // TCP_LISTEN
				continue
			}
			a, p, ok := strings.Cut(fs[1], ":")
			if !ok {
				continue
			}
			if lp, err := strconv.ParseUint(p, 16, 16); err != nil || int(lp) != port {
				continue
			}
			ip := procIP(a)
			if ip == nil || ip.IsUnspecified() || want == nil || ip.Equal(want) {
				return true
			}
		}
	}
	return false
}

// procIP decodes an address of /proc/net/tcp{,6}: 32-bit words in host
// (little-endian here) byte order.
func procIP(h string) net.IP {
	b := make([]byte, len(h)/2)
	for i := range b {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil
		}
		b[i] = byte(v)
	}
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	if len(b) != 4 && len(b) != 16 {
		return nil
	}
	return net.IP(b)
}

// inNetns runs f on an OS thread that joined pid's network namespace. A
// thread that cannot return to ours stays locked and ends with its
// goroutine.
func inNetns(pid int, f func() bool) (bool, error) {
	target, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(target)
	type res struct {
		ok  bool
		err error
	}
	out := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			out <- res{err: err}
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			out <- res{err: err}
			return
		}
		ok := f()
		if unix.Setns(self, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		out <- res{ok: ok}
	}()
	r := <-out
	return r.ok, r.err
}
