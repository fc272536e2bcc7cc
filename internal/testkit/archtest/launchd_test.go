package archtest

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/host/shellenv"
)

// plistValue is a property list value: a string, integer, bool, array or
// dict (the kinds the LaunchAgents use).
type plistValue struct {
	kind  string
	text  string
	items []plistValue
	dict  map[string]plistValue
}

func decodePlistValue(d *xml.Decoder, start xml.StartElement) (plistValue, error) {
	v := plistValue{kind: start.Name.Local}
	switch v.kind {
	case "true", "false":
		return v, d.Skip()
	case "string", "integer":
		var s string
		err := d.DecodeElement(&s, &start)
		v.text = s
		return v, err
	case "array", "dict":
		if v.kind == "dict" {
			v.dict = map[string]plistValue{}
		}
		key := ""
		for {
			tok, err := d.Token()
			if err != nil {
				return v, err
			}
			switch t := tok.(type) {
			case xml.EndElement:
				return v, nil
			case xml.StartElement:
				if t.Name.Local == "key" {
					if err := d.DecodeElement(&key, &t); err != nil {
						return v, err
					}
					continue
				}
				item, err := decodePlistValue(d, t)
				if err != nil {
					return v, err
				}
				if v.kind == "dict" {
					v.dict[key] = item
				} else {
					v.items = append(v.items, item)
				}
			}
		}
	}
	return v, d.Skip()
}

// TestLaunchdPlists: the LaunchAgents in contrib/launchd are well-formed
// property lists that run conch serve and conch node with a home, keep
// the job's process group alive after it exits (AbandonProcessGroup, so
// that sessions outlive a restart), restart the program, and set PATH to
// the macOS minimal PATH the code applies (shellenv.PathFloor). Not
// loaded by launchd here: not yet run on macOS.
func TestLaunchdPlists(t *testing.T) {
	for file, cmd := range map[string]string{"sh.conch.serve.plist": "serve", "sh.conch.node.plist": "node"} {
		f, err := os.Open(filepath.Join("..", "..", "..", "contrib", "launchd", file))
		if err != nil {
			t.Fatal(err)
		}
		d := xml.NewDecoder(f)
		var top plistValue
		for {
			tok, err := d.Token()
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "dict" {
				if top, err = decodePlistValue(d, se); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				break
			}
		}
		f.Close()
		job := top.dict
		if job["Label"].text != strings.TrimSuffix(file, ".plist") {
			t.Errorf("%s: Label %q", file, job["Label"].text)
		}
		var argv []string
		for _, a := range job["ProgramArguments"].items {
			argv = append(argv, a.text)
		}
		if len(argv) != 4 || filepath.Base(argv[0]) != "conch" || argv[1] != cmd || argv[2] != "--home" || !filepath.IsAbs(argv[3]) {
			t.Errorf("%s: ProgramArguments %q", file, argv)
		}
		if job["AbandonProcessGroup"].kind != "true" || job["RunAtLoad"].kind != "true" {
			t.Errorf("%s: AbandonProcessGroup %q, RunAtLoad %q", file, job["AbandonProcessGroup"].kind, job["RunAtLoad"].kind)
		}
		if k := job["KeepAlive"]; k.kind != "true" && k.dict["SuccessfulExit"].kind != "false" {
			t.Errorf("%s: KeepAlive restarts nothing", file)
		}
		if path := job["EnvironmentVariables"].dict["PATH"].text; !slices.Equal(strings.Split(path, ":"), shellenv.PathFloor("darwin")) {
			t.Errorf("%s: PATH %q, want the macOS floor %q", file, path, shellenv.PathFloor("darwin"))
		}
		for _, k := range []string{"StandardOutPath", "StandardErrorPath"} {
			if p := job[k].text; !strings.HasPrefix(p, argv[3]+"/") {
				t.Errorf("%s: %s %q is not in the home %s", file, k, p, argv[3])
			}
		}
	}
}
