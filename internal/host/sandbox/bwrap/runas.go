//go:build linux

package bwrap

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/conchsh/conch/internal/host/sandbox"
	"golang.org/x/sys/unix"
)

// A gateway running as root would run bwrap's command as root mapped
// into its user namespace: without capabilities, but still the owner of
// every root-owned file the sandbox shows (/etc/shadow, root's 0600
// files under /etc, /opt, …). So as root, bwrap itself runs as
// sandbox.runAs (default 65534:65534, nobody) and the command is that uid
// on the host too. The workspace and the scope home stay writable
// through idmapped mounts: the files of the workspace's owner (of root,
// in the scope home) appear owned by the runAs user inside, and what it
// writes lands owned by them on the disk. The
// mounts are made by `conch sandbox-init --stage` in a mount namespace
// of its own (root, before it drops to the runAs user and execs bwrap),
// under StageDir, a path the runAs user can reach.

// StageDir is where a root gateway's staged mounts appear, in the run's
// own mount namespace only (a tmpfs there hides the host's directory).
const StageDir = "/run/conch-sandbox"

// Stage is what `sandbox-init --stage` mounts before it becomes the
// runAs user.
type Stage struct {
	Workspace string `json:"ws"`   // host path, idmapped to StageDir/ws
	Home      string `json:"home"` // scope home, idmapped to StageDir/home
	Exe       string `json:"exe"`  // the conch binary, bound to StageDir/conch
	UID       int    `json:"uid"`
	GID       int    `json:"gid"`
	// OwnerUID and OwnerGID own the workspace directory on the host: the
	// workspace mount shows their files as the runAs user's, and what
	// the command writes there lands owned by them.
	OwnerUID int  `json:"ouid"`
	OwnerGID int  `json:"ogid"`
	ReadOnly bool `json:"ro"` // the workspace read-only
	// Beneath: bwrap takes the binds below the staged workspace as
	// descriptors (beneath.go).
	Beneath bool `json:"beneath,omitempty"`
	// RootNS and WsNS, when set, are the idmap user namespaces the
	// gateway made once and holds open (heldUserns); without them the
	// stage makes its own.
	RootNS *NSRef `json:"rootns,omitempty"`
	WsNS   *NSRef `json:"wsns,omitempty"`
}

// NSRef names a namespace descriptor another process holds open: the
// stage reopens /proc/PID/fd/FD and accepts it only if it is the same
// namespace (device and inode), so a reused pid or fd number cannot hand
// it another one.
type NSRef struct {
	PID int    `json:"pid"`
	FD  int    `json:"fd"`
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

type idmapKey struct{ owner, ownerGID, uid, gid int }

var heldNS struct {
	sync.Mutex
	m map[idmapKey]*os.File
}

// heldUserns returns a reference to the idmap user namespace of
// idmapUserns(owner, ownerGID, uid, gid), made on first use and held
// open by this process from then on: a mapping never changes, and
// making one costs a process start (idmapUserns) on every run.
func heldUserns(owner, ownerGID, uid, gid int) (*NSRef, error) {
	heldNS.Lock()
	defer heldNS.Unlock()
	k := idmapKey{owner, ownerGID, uid, gid}
	f := heldNS.m[k]
	if f == nil {
		var err error
		if f, err = idmapUserns(owner, ownerGID, uid, gid); err != nil {
			return nil, err
		}
		if heldNS.m == nil {
			heldNS.m = map[idmapKey]*os.File{}
		}
		heldNS.m[k] = f
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	return &NSRef{PID: os.Getpid(), FD: int(f.Fd()), Dev: st.Dev, Ino: st.Ino}, nil
}

// openNS reopens the namespace ref names, or fails.
func openNS(ref *NSRef) (*os.File, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/fd/%d", ref.PID, ref.FD))
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Dev != ref.Dev || st.Ino != ref.Ino {
		f.Close()
		return nil, fmt.Errorf("the held user namespace /proc/%d/fd/%d is gone", ref.PID, ref.FD)
	}
	if t, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE); err != nil || t != unix.CLONE_NEWUSER {
		f.Close()
		return nil, fmt.Errorf("/proc/%d/fd/%d is not a user namespace", ref.PID, ref.FD)
	}
	return f, nil
}

// userns opens the held namespace ref when there is one and it is still
// there, and makes a new one otherwise.
func userns(ref *NSRef, owner, ownerGID, uid, gid int) (*os.File, error) {
	if ref != nil {
		if f, err := openNS(ref); err == nil {
			return f, nil
		}
	}
	return idmapUserns(owner, ownerGID, uid, gid)
}

func encodeStage(st Stage) string {
	b, _ := json.Marshal(st)
	return base64.StdEncoding.EncodeToString(b)
}

// RunStage makes the staged mounts, drops to the runAs user and execs
// argv (bwrap).
func RunStage(enc string, argv []string) int {
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return sandbox.InitFail("stage: " + err.Error())
	}
	var st Stage
	if err := json.Unmarshal(raw, &st); err != nil {
		return sandbox.InitFail("stage: " + err.Error())
	}
	if err := stageMounts(st); err != nil {
		return sandbox.InitFail("stage: " + err.Error())
	}
	if err := syscall.Setgroups(nil); err != nil {
		return sandbox.InitFail("setgroups: " + err.Error())
	}
	if err := syscall.Setresgid(st.GID, st.GID, st.GID); err != nil {
		return sandbox.InitFail("setgid: " + err.Error())
	}
	if err := syscall.Setresuid(st.UID, st.UID, st.UID); err != nil {
		return sandbox.InitFail("setuid: " + err.Error())
	}
	if st.Beneath {
		// As the runAs user, the user bwrap mounts as.
		if argv, err = bindBeneath(filepath.Join(StageDir, "ws"), argv); err != nil {
			return sandbox.InitFail(err.Error())
		}
	}
	err = syscall.Exec(argv[0], argv, os.Environ())
	return sandbox.InitFail(fmt.Sprintf("exec %s: %v", argv[0], err))
}

func stageMounts(st Stage) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Clone the trees before the tmpfs hides anything.
	ws, err := unix.OpenTree(unix.AT_FDCWD, st.Workspace, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open the workspace %s: %w", st.Workspace, err)
	}
	defer unix.Close(ws)
	home, err := unix.OpenTree(unix.AT_FDCWD, st.Home, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open the scope home %s: %w", st.Home, err)
	}
	defer unix.Close(home)
	exe, err := unix.OpenTree(unix.AT_FDCWD, st.Exe, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open %s: %w", st.Exe, err)
	}
	defer unix.Close(exe)
	// The scope home belongs to root (the gateway); the workspace to its
	// owner.
	rootNS, err := userns(st.RootNS, 0, 0, st.UID, st.GID)
	if err != nil {
		return err
	}
	defer rootNS.Close()
	wsNS := rootNS
	if st.OwnerUID != 0 || st.OwnerGID != 0 {
		if wsNS, err = userns(st.WsNS, st.OwnerUID, st.OwnerGID, st.UID, st.GID); err != nil {
			return err
		}
		defer wsNS.Close()
	}
	if err := unix.Mount("tmpfs", StageDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount a tmpfs on %s: %w", StageDir, err)
	}
	for _, m := range []struct {
		fd    int
		name  string
		dir   bool
		idmap *os.File
		ro    bool
	}{{ws, "ws", true, wsNS, st.ReadOnly}, {home, "home", true, rootNS, false}, {exe, "conch", false, nil, true}} {
		dst := filepath.Join(StageDir, m.name)
		if m.dir {
			err = os.Mkdir(dst, 0o755)
		} else {
			err = os.WriteFile(dst, nil, 0o644)
		}
		if err != nil {
			return err
		}
		attr := unix.MountAttr{}
		if m.idmap != nil {
			attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
			attr.Userns_fd = uint64(m.idmap.Fd())
		}
		if m.ro {
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		}
		if attr.Attr_set != 0 {
			if err := unix.MountSetattr(m.fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
				return fmt.Errorf("idmap %s (does the file system support idmapped mounts?): %w", m.name, err)
			}
		}
		if err := unix.MoveMount(m.fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("mount %s: %w", dst, err)
		}
	}
	return nil
}

// idmapUserns returns a user namespace in which uid owner is uid on the
// host (and gid ownerGID gid): the mapping of an idmapped mount that
// shows owner's files as uid's. A short-lived child holds it while it is
// opened.
func idmapUserns(owner, ownerGID, uid, gid int) (*os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "sandbox-init", "--hold")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: owner, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: ownerGID, HostID: gid, Size: 1}}}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("make the idmap user namespace: %w", err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Hold blocks until stdin ends (the idmap namespace's holder).
func Hold() int {
	io.Copy(io.Discard, os.Stdin)
	return 0
}
