package supervisor

import (
	"golang.org/x/sys/unix"
)

// procTableNow lists the processes of the machine from sysctl
// kern.proc.all. Start is P_starttime in microseconds. Not yet run on
// macOS.
func procTableNow() ([]procInfo, error) {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, err
	}
	out := make([]procInfo, 0, len(kps))
	for i := range kps {
		out = append(out, kinfoProc(&kps[i]))
	}
	return out, nil
}

// sZomb is SZOMB of <sys/proc.h>: the process has exited and waits to be
// reaped.
const sZomb = 5

func kinfoProc(kp *unix.KinfoProc) procInfo {
	tv := kp.Proc.P_starttime
	return procInfo{
		PID:    int(kp.Proc.P_pid),
		PPID:   int(kp.Eproc.Ppid),
		PGID:   int(kp.Eproc.Pgid),
		Start:  uint64(tv.Sec)*1e6 + uint64(tv.Usec),
		Zombie: kp.Proc.P_stat == sZomb,
	}
}

// procOf is one process's row, from sysctl kern.proc.pid.<pid>.
func procOf(pid int) (procInfo, bool) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) {
		return procInfo{}, false
	}
	return kinfoProc(kp), true
}
