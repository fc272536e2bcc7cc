package backends_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
	"github.com/conchsh/conch/internal/host/sandbox/landlock"
)

// layerName turns a layer as reported (landlock-abi-7, uid-65534) into
// its name in the table (landlock-abi-N, uid-N).
func layerName(l string) string {
	return regexp.MustCompile(`-\d+$`).ReplaceAllString(l, "-N")
}

// TestLayerTable: the table in docs/sandbox.md that sets each of bwrap's
// isolation layers against landlock's matches what the two backends
// report. Every layer bwrap reports, over every setting that changes its
// list, is a row and every row is such a layer; every layer named in the
// landlock column is reported by the landlock backend under some ABI (1
// to 9), network setting and IPC namespace; a row whose landlock column
// is "—" is a layer landlock never reports.
func TestLayerTable(t *testing.T) {
	b, err := os.ReadFile("../../../../docs/sandbox.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "### bwrap's layers and landlock's counterparts")
	if !ok {
		t.Fatal("docs/sandbox.md: no section \"bwrap's layers and landlock's counterparts\"")
	}
	rows := map[string][]string{} // bwrap layer → landlock layers
	cell := regexp.MustCompile("`([a-z0-9-]+(?:-N)?)`")
	for _, line := range strings.Split(sec, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		f := strings.Split(line, "|")
		if len(f) != 6 || strings.HasPrefix(strings.TrimSpace(f[1]), "---") || strings.TrimSpace(f[1]) == "bwrap layer" {
			continue
		}
		m := cell.FindStringSubmatch(f[1])
		if m == nil {
			t.Fatalf("row without a layer name: %s", line)
		}
		var ll []string
		if strings.TrimSpace(f[3]) != "—" {
			for _, x := range cell.FindAllStringSubmatch(f[3], -1) {
				ll = append(ll, x[1])
			}
			if len(ll) == 0 {
				t.Fatalf("row %s: the landlock column is neither layers nor —: %q", m[1], f[3])
			}
		}
		rows[m[1]] = ll
	}
	if len(rows) == 0 {
		t.Fatal("the table has no rows")
	}

	bwrapLayers := map[string]bool{}
	bw := sandbox.New("bwrap", config.SandboxSettings{})
	for _, net := range []string{"none", "open"} {
		for _, access := range []string{"rw", "ro", "none"} {
			for _, git := range []string{"ro", "rw"} {
				for _, uid := range []int{0, 65534} {
					s := config.SandboxSettings{Network: net, WorkspaceAccess: access, GitAccess: git, RunAsUID: uid, RunAsGID: uid}
					for _, l := range bw.Layers(&sandbox.Run{Settings: s}) {
						bwrapLayers[layerName(l)] = true
					}
				}
			}
		}
	}
	if os.Geteuid() != 0 {
		bwrapLayers["uid-N"] = true // reported by a root gateway only
	}
	landlockLayers := map[string]bool{}
	for abi := 1; abi <= 9; abi++ {
		for _, net := range []string{"none", "open"} {
			for _, ipcns := range []bool{false, true} {
				for _, l := range landlock.LayersFor(abi, net, ipcns) {
					landlockLayers[layerName(l)] = true
				}
			}
		}
	}
	// What the backend reports here is one of those.
	for _, l := range sandbox.New("landlock", config.SandboxSettings{}).Layers(&sandbox.Run{}) {
		if !landlockLayers[layerName(l)] {
			t.Errorf("the landlock backend reports %s, which LayersFor never does", l)
		}
	}
	for l := range bwrapLayers {
		if _, ok := rows[l]; !ok {
			t.Errorf("docs/sandbox.md: bwrap reports the layer %s, which the table does not list", l)
		}
	}
	for l, ll := range rows {
		if !bwrapLayers[l] {
			t.Errorf("docs/sandbox.md: the table lists %s, which bwrap never reports", l)
		}
		for _, x := range ll {
			if !landlockLayers[x] {
				t.Errorf("docs/sandbox.md: row %s names the landlock layer %s, which landlock never reports", l, x)
			}
		}
		if ll == nil && landlockLayers[l] {
			t.Errorf("docs/sandbox.md: row %s says landlock has no counterpart, but landlock reports %s", l, l)
		}
	}
}
