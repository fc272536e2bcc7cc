package gateway

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// TestStalledConnectionsLeaveTheEngineRunning: clients that open more
// connections than the gateway has descriptors and never finish their
// requests (a body that never ends) do not take the engine's descriptors:
// while they hang, the engine socket serves the CLI, commands start and
// running sessions go on; once they go, HTTP calls work again.
func TestStalledConnectionsLeaveTheEngineRunning(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	const nofile = 512
	home := e2etest.NewHome(t, "")
	cmd := exec.Command(prlimit, fmt.Sprintf("--nofile=%d:%d", nofile, nofile), e2etest.ConchBin, "serve", "--home", home, "--listen", "127.0.0.1:0", "--log-level", "warn")
	out, _ := cmd.StdoutPipe()
	_, stderrFile := e2etest.NewLog(t, "conch serve")
	cmd.Stderr = stderrFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &e2etest.Gateway{T: t, Home: home, Cmd: cmd}
	t.Cleanup(g.Stop)
	sc := bufio.NewScanner(out)
	for g.Base == "" && sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "cat_") && g.Token == "" {
			g.Token = line
		}
		if m := e2etest.ListenRE.FindStringSubmatch(line); m != nil {
			g.Base = m[1]
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if g.Base == "" {
		t.Fatal("conch serve did not start")
	}
	const mark = "927.1"
	code, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "for i in $(seq 1 100000); do echo tick-" + mark + "-$i; sleep 0.05; done", "background": true}, nil)
	d, _ := m["details"].(map[string]any)
	id, _ := d["sessionId"].(string)
	if code != 200 || id == "" {
		t.Fatalf("background exec: %d %v", code, m)
	}

	// More stalled requests than the process has descriptors.
	addr := strings.TrimPrefix(g.Base, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < nofile+100; i++ {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			break // the accept queue is full: as stalled as it gets
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /v1/exec HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", addr, g.Token)
	}
	t.Logf("%d stalled connections", len(conns))

	// The engine socket still serves, and new commands start.
	stdout, stderr, rc := e2etest.RunCLI(t, nil, "exec", "--home", home, "--", "echo through-the-socket")
	if rc != 0 || !strings.Contains(stdout, "through-the-socket") {
		t.Fatalf("conch exec through the engine socket while connections stall: rc %d %q %q", rc, stdout, stderr)
	}
	// The running session goes on writing its output.
	poll := func() string {
		o, _, _ := e2etest.RunCLI(t, nil, "log", id, "--home", home)
		return o
	}
	before := strings.Count(poll(), "tick-"+mark)
	e2etest.Eventually(t, 60*time.Second, func() string {
		if n := strings.Count(poll(), "tick-"+mark); n <= before {
			return fmt.Sprintf("session output stuck at %d lines", n)
		}
		return ""
	})

	for _, c := range conns {
		c.Close()
	}
	conns = nil
	e2etest.Eventually(t, 60*time.Second, func() string {
		code, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": "echo after"}, nil)
		if code != 200 || !strings.Contains(fmt.Sprint(m["text"]), "after") {
			return fmt.Sprintf("HTTP exec after the stalled clients went: %d %v", code, m)
		}
		return ""
	})
	g.Do("POST", "/v1/sessions/"+id+"/kill", g.Token, nil, nil)
}
