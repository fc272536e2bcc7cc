//go:build linux

package sandbox

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/testkit/e2etest"
	"golang.org/x/sys/unix"
)

// TestLandlockHostIPC: a landlock sandbox has no IPC namespace of bwrap's
// kind, so a System V segment made on the host (world-writable, so only
// the sandbox can refuse it) must still be out of reach: attaching to it
// by its key through the C library (python's ctypes, a real program
// inside) fails and leaves it unwritten, every System V and POSIX message
// queue call fails with EPERM when the conch binary inside makes it, and
// with an IPC namespace of its own (a root gateway) `ipcs -m` does not
// list the host's segment. On the code before the filter refused these
// calls the attach wrote the host segment.
func TestLandlockHostIPC(t *testing.T) {
	needLandlock(t)
	t.Parallel()
	key := int(rand.Int32N(1<<30)) + 1<<30
	id, err := unix.SysvShmGet(key, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o666)
	if err != nil {
		t.Fatalf("make the host segment: %v", err)
	}
	defer unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	seg, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		t.Fatalf("attach the host segment: %v", err)
	}
	defer unix.SysvShmDetach(seg)
	copy(seg, "host-930\x00")

	se := newSandbox(t, map[string]any{"backend": "landlock"})
	exe := filepath.Join(se.ws, "conch")
	if data, err := os.ReadFile(e2etest.ConchBin); err != nil || os.WriteFile(exe, data, 0o755) != nil {
		t.Fatalf("copy conch: %v", err)
	}
	names := sandbox.NativeSyscalls(sandbox.IPCSyscalls)
	attach := fmt.Sprintf(`import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
i = libc.shmget(%d, 0, 0)
print("shmget", i, ctypes.get_errno())
if i >= 0:
    p = libc.shmat(i, None, 0)
    print("shmat", p, ctypes.get_errno())
    if p not in (None, ctypes.c_void_p(-1).value):
        ctypes.memmove(p, b"PWNED930", 8)
        print("WROTE")
`, key)
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		py = ""
	}
	cmd := fmt.Sprintf(`for s in %s; do echo "probe $s $(./conch sandbox-init --probe syscall $s)"; done; echo ---; ipcs -m; echo ---`, strings.Join(names, " "))
	if py != "" {
		os.WriteFile(filepath.Join(se.ws, "attach.py"), []byte(attach), 0o644)
		cmd += "; " + py + " attach.py"
	}
	r := se.c.Exec(map[string]any{"command": cmd})
	t.Log(r.Text)
	sb, _ := r.D["sandbox"].(map[string]any)
	if r.Str("host") != "sandbox" || sb["backend"] != "landlock" {
		t.Fatalf("not a landlock run: %s %v", r.Text, r.D)
	}
	if !bytes.HasPrefix(seg, []byte("host-930\x00")) {
		t.Errorf("the sandboxed command wrote the host's segment: %q", seg[:16])
	}
	if strings.Contains(r.Text, "WROTE") {
		t.Errorf("the sandboxed command attached the host's segment: %s", r.Text)
	}
	got := map[string]string{}
	for _, l := range strings.Split(r.Text, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "probe" {
			got[f[1]] = f[2]
		}
	}
	for _, n := range names {
		if got[n] != "EPERM" {
			t.Errorf("%s inside the landlock sandbox: %q, want EPERM", n, got[n])
		}
	}
	listing := r.Text
	if a, b, ok := strings.Cut(r.Text, "---"); ok {
		listing, _, _ = strings.Cut(b, "---")
		_ = a
	}
	hexKey := fmt.Sprintf("0x%08x", key)
	layers := fmt.Sprint(sb["layers"])
	if slices.Contains(strings.Fields(strings.Trim(layers, "[]")), "ipcns") {
		if strings.Contains(listing, hexKey) {
			t.Errorf("ipcs -m inside an IPC namespace of its own lists the host's segment %s: %s", hexKey, listing)
		}
	} else {
		t.Logf("no ipcns layer (not root): /proc/sysvipc still lists the host's objects; the calls are refused")
	}
}
