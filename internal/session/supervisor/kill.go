package supervisor

import (
	"fmt"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"os/exec"
	"syscall"
	"time"
)

func (s *sup) grace() time.Duration {
	return time.Duration(s.spec.KillGraceMs) * time.Millisecond
}

// kill starts the kill sequence once; later calls only keep the first
// cause.
func (s *sup) kill(by proto.KilledBy, grace time.Duration) {
	s.mu.Lock()
	if s.killedBy == "" {
		select {
		case <-s.mainExited:
			// Already ended by itself: not a kill. Output held back
			// by a full disk is not waited for any more.
			s.mu.Unlock()
			s.abandonOutput("kill after the end")
			return
		default:
		}
		s.killedBy = by
		s.timedOut = by == proto.KilledByTimeout
	}
	if s.killing {
		s.mu.Unlock()
		return
	}
	s.killing = true
	s.mu.Unlock()
	go s.treeKill(grace)
}

// treeKill sends SIGTERM to the group and every member, waits up to grace
// for them to go, then SIGKILLs whatever is left.
func (s *sup) treeKill(grace time.Duration) {
	s.mu.Lock()
	s.killing = true
	s.mu.Unlock()
	members := s.cont.members()
	n := 0
	for _, pid := range members {
		if pid != s.cmd.Process.Pid {
			n++
		}
	}
	s.mu.Lock()
	if s.killedBy != "" {
		s.killCount = n
	}
	s.mu.Unlock()
	s.killInside(grace)
	s.cont.signal(syscall.SIGTERM)
	if s.ptmx != nil {
		// A shell on a PTY also expects SIGHUP when its terminal goes.
		s.cont.signal(syscall.SIGHUP)
	}
	if !s.waitTreeGone(grace) {
		s.cont.killAll()
		s.waitTreeGone(2 * time.Second)
	}
}

// killInside runs the sandbox's in-sandbox kill (docker), if any, and
// waits for it up to grace + 10 s.
func (s *sup) killInside(grace time.Duration) {
	sb := s.spec.Sandbox
	if sb == nil || len(sb.KillArgv) == 0 {
		return
	}
	argv := append(append([]string{}, sb.KillArgv...), "--kill-session", s.spec.ID, "--grace-ms", fmt.Sprint(grace.Milliseconds()))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if err := cmd.Start(); err != nil {
		s.logf("in-sandbox kill: %v", err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			s.logf("in-sandbox kill: %v", err)
		}
	case <-time.After(grace + 10*time.Second):
		cmd.Process.Kill()
		s.logf("in-sandbox kill did not finish in time")
	}
}

// waitTreeGone waits until the main process was reaped and no member is
// left, or d passes; it reports whether the tree is gone. It looks again
// after 0.5 ms, then twice as long each time up to 10 ms: the processes a
// sandbox leaves for a moment after its command (bwrap's init in its pid
// namespace) are gone within a millisecond or two, and every sandboxed
// call's end state waits for them.
func (s *sup) waitTreeGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	wait := 500 * time.Microsecond
	for {
		exited := false
		select {
		case <-s.mainExited:
			exited = true
		default:
		}
		if exited && len(s.cont.members()) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, 10*time.Millisecond)
	}
}
