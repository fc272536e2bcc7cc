package winshell

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// machine is a generated Windows machine: which PowerShells exist where.
type machine struct {
	programFiles, programW6432, systemRoot bool // the variable is set
	pwshInPF, pwshInPF6432, pwshOnPath     bool
	psInRoot, psOnPath                     bool
}

func (m machine) system() System {
	var env []string
	files := map[string]bool{}
	// Keys in other letter cases than Windows uses: lookups must fold.
	if m.programFiles {
		env = append(env, `PROGRAMFILES=C:\Program Files (x86)`)
		if m.pwshInPF {
			files[`C:\Program Files (x86)\PowerShell\7\pwsh.exe`] = true
		}
	}
	if m.programW6432 {
		env = append(env, `programw6432=C:\Program Files\`)
		if m.pwshInPF6432 {
			files[`C:\Program Files\PowerShell\7\pwsh.exe`] = true
		}
	}
	if m.systemRoot {
		env = append(env, `SYSTEMROOT=D:\Win`)
		if m.psInRoot {
			files[`D:\Win\System32\WindowsPowerShell\v1.0\powershell.exe`] = true
		}
	}
	return System{
		Getenv: FoldEnv(env),
		IsFile: func(p string) bool { return files[p] },
		LookPath: func(f string) (string, error) {
			switch {
			case f == "pwsh.exe" && m.pwshOnPath:
				return `E:\tools\pwsh.exe`, nil
			case f == "powershell.exe" && m.psOnPath:
				return `E:\old\powershell.exe`, nil
			}
			return "", errors.New("not found")
		},
	}
}

// want is the rule, written as the ordered list of candidates.
func (m machine) want() Shell {
	switch {
	case m.programFiles && m.pwshInPF:
		return Shell{`C:\Program Files (x86)\PowerShell\7\pwsh.exe`, Pwsh}
	case m.programW6432 && m.pwshInPF6432:
		return Shell{`C:\Program Files\PowerShell\7\pwsh.exe`, Pwsh}
	case m.pwshOnPath:
		return Shell{`E:\tools\pwsh.exe`, Pwsh}
	case m.systemRoot && m.psInRoot:
		return Shell{`D:\Win\System32\WindowsPowerShell\v1.0\powershell.exe`, WindowsPowerShell}
	case m.psOnPath:
		return Shell{`E:\old\powershell.exe`, WindowsPowerShell}
	case m.systemRoot:
		return Shell{`D:\Win\System32\WindowsPowerShell\v1.0\powershell.exe`, WindowsPowerShell}
	}
	return Shell{`C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe`, WindowsPowerShell}
}

// TestPickEveryMachine: PowerShell 7 from %ProgramFiles%, then
// %ProgramW6432%, then PATH; else Windows PowerShell 5.1, for every
// combination of what exists (256 machines), environment keys in any
// letter case.
func TestPickEveryMachine(t *testing.T) {
	for bits := 0; bits < 1<<8; bits++ {
		b := func(i int) bool { return bits&(1<<i) != 0 }
		m := machine{b(0), b(1), b(2), b(3), b(4), b(5), b(6), b(7)}
		if got, want := Pick(m.system()), m.want(); got != want {
			t.Errorf("%+v: picked %+v, want %+v", m, got, want)
		}
	}
}

// TestArgvGolden: the command lines each PowerShell gets, for commands
// with quotes, backslashes, newlines and non-ASCII text
// (testdata/argv.golden; -update rewrites it).
func TestArgvGolden(t *testing.T) {
	commands := []string{
		`Get-ChildItem`,
		`echo "hello world"`,
		`Write-Output 'it''s'; exit 3`,
		"git log -1\r\ndir C:\\Users\\me\\\"quoted dir\"\\",
		`echo "ünïcødé 日本 🐚"`,
	}
	var b strings.Builder
	for _, sh := range []Shell{{`C:\Program Files\PowerShell\7\pwsh.exe`, Pwsh}, {`C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe`, WindowsPowerShell}} {
		for _, c := range commands {
			fmt.Fprintf(&b, "%s %q\n", sh.Kind, c)
			for _, a := range sh.Argv(c) {
				fmt.Fprintf(&b, "\t%q\n", a)
			}
		}
	}
	golden := filepath.Join("testdata", "argv.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if b.String() != string(want) {
		t.Fatalf("argv changed:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestEncodeRoundTrip: -EncodedCommand carries every command exactly
// (surrogate pairs included), generated over quotes, backslashes,
// control characters and astral runes.
func TestEncodeRoundTrip(t *testing.T) {
	alphabet := []rune{'a', '"', '\'', '\\', ' ', '\n', '\r', '\t', '$', '`', '%', 'é', '日', '🐚', 0}
	for n := 0; n < 4000; n++ {
		var rs []rune
		for k, x := 0, n; k < 6; k, x = k+1, x/len(alphabet) {
			rs = append(rs, alphabet[(x+k*7)%len(alphabet)])
		}
		cmd := string(rs)
		raw, err := base64.StdEncoding.DecodeString(Encode(cmd))
		if err != nil || len(raw)%2 != 0 {
			t.Fatalf("%q: %v", cmd, err)
		}
		units := make([]uint16, len(raw)/2)
		for i := range units {
			units[i] = uint16(raw[2*i]) | uint16(raw[2*i+1])<<8
		}
		if got := string(utf16.Decode(units)); got != cmd {
			t.Fatalf("%q came back as %q", cmd, got)
		}
	}
}

// TestFoldEnv: keys are found whatever their case; the first of two
// entries that differ only in case wins.
func TestFoldEnv(t *testing.T) {
	get := FoldEnv([]string{"Path=C:\\a", "PATH=C:\\b", "=C:=C:\\", "x=1"})
	for _, k := range []string{"PATH", "path", "Path"} {
		if got := get(k); got != `C:\a` {
			t.Errorf("%s = %q", k, got)
		}
	}
	if get("X") != "1" || get("missing") != "" {
		t.Errorf("X=%q missing=%q", get("X"), get("missing"))
	}
}
