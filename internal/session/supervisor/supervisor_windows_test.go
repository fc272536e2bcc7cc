package supervisor

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/conchsh/conch/internal/base/fsutil"
	"github.com/conchsh/conch/internal/session/supervisor/proto"
	"golang.org/x/sys/windows"
)

// Tests of the Windows supervisor that need Windows: built by the
// cross-build gate, not yet run on Windows.

// powershell is Windows PowerShell 5.1, which every Windows 10 and 11
// has.
func powershell(t *testing.T) string {
	p := filepath.Join(os.Getenv("SystemRoot"), `System32\WindowsPowerShell\v1.0\powershell.exe`)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no Windows PowerShell: %v", err)
	}
	return p
}

// TestComposeCommandLineRoundTrip: the command line createProcess
// builds is read back by CommandLineToArgvW into the same argv, for the
// PowerShell command lines conch builds and arguments that need quoting.
func TestComposeCommandLineRoundTrip(t *testing.T) {
	for _, argv := range [][]string{
		{`C:\Program Files\PowerShell\7\pwsh.exe`, "-NoLogo", "-NoProfile", "-NonInteractive", "-Command", `echo "hello world"`},
		{`C:\Program Files\PowerShell\7\pwsh.exe`, "-Command", `dir C:\Users\me\"quoted dir"\`},
		{`C:\x.exe`, "", " ", `a\\b`, `a\"b`, `trailing\`, "tab\there", "new\nline", "ünïcødé 🐚"},
	} {
		got, err := windows.DecomposeCommandLine(windows.ComposeCommandLine(argv))
		if err != nil || !slices.Equal(got, argv) {
			t.Errorf("%q: read back as %q (%v)", argv, got, err)
		}
	}
}

// TestJobKillsTreeWindows: a command that starts a process and waits is
// killed with its child (the job holds both), the end counts the child,
// and nothing of the job is left.
func TestJobKillsTreeWindows(t *testing.T) {
	ps := powershell(t)
	h, dir := launch(t, proto.Spec{Argv: []string{ps, "-NoProfile", "-NonInteractive", "-Command",
		"Start-Process -NoNewWindow -FilePath ping.exe -ArgumentList '-n','1000','127.0.0.1'; Start-Sleep 1000"}})
	var meta proto.Meta
	fsutil.ReadJSON(proto.MetaPath(dir), &meta)
	deadline := time.Now().Add(30 * time.Second)
	for len(descendants(meta.PID)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the child never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := Call(meta.Socket, proto.Request{Op: "kill", By: "operator"}); err != nil {
		t.Fatal(err)
	}
	ex := final(t, h, 30*time.Second)
	if ex.State != proto.StateKilled || *ex.KilledBy != "operator" || ex.DescendantsKilled < 1 {
		t.Fatalf("exit = %+v", ex)
	}
	if Alive(meta.PID, meta.PIDStartTime) {
		t.Fatal("the main process survived")
	}
}

// TestPTYWindows: a pseudoconsole session's output reaches the journal
// and the session ends with the command's exit code.
func TestPTYWindows(t *testing.T) {
	ps := powershell(t)
	h, _ := launch(t, proto.Spec{PTY: true, Cols: 80, Rows: 24, Argv: []string{ps, "-NoProfile", "-NonInteractive", "-Command", "Write-Output hello-conpty; exit 3"}})
	ex := final(t, h, 30*time.Second)
	if ex.State != proto.StateExited || ex.ExitCode == nil || *ex.ExitCode != 3 {
		t.Fatalf("exit = %+v", ex)
	}
}

// TestJobLimitsWindows: the limits asked for are set on the job and
// read back.
func TestJobLimitsWindows(t *testing.T) {
	c := newCgroup("limits-test")
	if c.job == 0 {
		t.Fatal("no job")
	}
	defer c.remove()
	enforced, warns := c.setLimits("", []proto.Limit{{Key: "memoryBytes", Setting: "quotas.session.memoryBytes", Value: 256 << 20}, {Key: "pids", Setting: "quotas.session.pids", Value: 8}})
	if len(enforced) != 2 || len(warns) != 0 {
		t.Fatalf("enforced %v warns %q", enforced, warns)
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if err := windows.QueryInformationJobObject(c.job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil); err != nil {
		t.Fatal(err)
	}
	if info.JobMemoryLimit != 256<<20 || info.BasicLimitInformation.ActiveProcessLimit != 8 ||
		info.BasicLimitInformation.LimitFlags&jobLimitKillOnJobClose == 0 {
		t.Fatalf("job limits %+v", info)
	}
}
