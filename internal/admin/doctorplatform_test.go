package admin

import (
	"errors"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/host/sandbox/seatbelt"
)

// TestPlatformChecksMacOS: doctor on macOS says it has not run there,
// what contains a session and what escapes it (setsid after a fork,
// launchd), that limits are not enforced, what the Seatbelt sandbox
// cannot enforce (each of the backend's gaps) or why it is unusable, and
// the privacy checks of a LaunchAgent; Linux has none of these.
func TestPlatformChecksMacOS(t *testing.T) {
	if c := platformChecks("linux", nil, nil); c != nil {
		t.Errorf("linux: %v", c)
	}
	gaps := (&seatbelt.Seatbelt{}).Gaps(nil)
	byID := func(cs []check) map[string]check {
		m := map[string]check{}
		for _, c := range cs {
			m[c.name] = c
		}
		return m
	}
	ok := byID(platformChecks("darwin", nil, gaps))
	if ok["platform.untested"].level != "warn" || !strings.Contains(ok["platform.untested"].text, "not yet been run on a Mac") {
		t.Errorf("untested: %+v", ok["platform.untested"])
	}
	sb := ok["sandbox.seatbelt"]
	if sb.level != "info" {
		t.Errorf("seatbelt usable: %+v", sb)
	}
	for _, g := range gaps {
		if !strings.Contains(sb.text, g) {
			t.Errorf("seatbelt: the gap %q is not said", g)
		}
	}
	if tcc := ok["platform.tcc"]; !strings.Contains(tcc.text, "Full Disk Access") {
		t.Errorf("tcc: %+v", tcc)
	}
	bad := byID(platformChecks("darwin", errors.New("no /usr/bin/sandbox-exec"), gaps))
	if sb := bad["sandbox.seatbelt"]; sb.level != "warn" || !strings.Contains(sb.text, "no /usr/bin/sandbox-exec") || !strings.Contains(sb.text, "sandbox_unavailable") {
		t.Errorf("seatbelt unusable: %+v", sb)
	}
	c := noCgroupFor("darwin")
	if c.name != "containment.tracker" || c.level != "warn" {
		t.Errorf("containment: %+v", c)
	}
	for _, w := range []string{"process group", "setsid", "launchd", "not enforced"} {
		if !strings.Contains(c.text, w) {
			t.Errorf("containment on macOS does not say %q: %s", w, c.text)
		}
	}
	if c := noCgroupFor("windows"); c.name != "containment.job" || !strings.Contains(c.text, "Job Object") {
		t.Errorf("windows: %+v", c)
	}
	if noCgroupFor("linux").name != "containment.no_cgroup" {
		t.Errorf("linux: %+v", noCgroupFor("linux"))
	}
}
