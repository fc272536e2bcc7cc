package host

import (
	"slices"
	"testing"
)

// TestEnvBuildWindowsRules: with Windows rules one variable in any
// spelling is one entry: a layer's "PATH" replaces the base's "Path"
// under the base's spelling, the login PATH and pathPrepend merge into
// it with ";" (a drive letter's ":" is no separator), and the markers
// replace any spelling of theirs. Unix rules keep spellings apart.
func TestEnvBuildWindowsRules(t *testing.T) {
	spec := EnvSpec{
		Base:        map[string]string{"Path": `C:\Windows\system32;C:\Windows`, "SystemRoot": `C:\Windows`, "conch_shell": "x"},
		Layers:      []map[string]string{{"TEMP": `C:\t`}, {"temp": `D:\t`}},
		LoginPATH:   `C:\Tools;C:\Windows`,
		PathPrepend: []string{`C:\first`},
	}
	want := []string{`OPENCLAW_SHELL=exec`, `Path=C:\first;C:\Tools;C:\Windows;C:\Windows\system32`, `SystemRoot=C:\Windows`, `TEMP=D:\t`, `conch_shell=exec`}
	if got := spec.build(windowsEnvRules); !slices.Equal(got, want) {
		t.Errorf("windows rules:\n got %q\nwant %q", got, want)
	}
	got := EnvSpec{Base: map[string]string{"Path": "/a", "PATH": "/usr/bin"}, LoginPATH: "/l"}.build(unixEnvRules)
	if want := []string{"CONCH_SHELL=exec", "OPENCLAW_SHELL=exec", "PATH=/l:/usr/bin", "Path=/a"}; !slices.Equal(got, want) {
		t.Errorf("unix rules:\n got %q\nwant %q", got, want)
	}
}
