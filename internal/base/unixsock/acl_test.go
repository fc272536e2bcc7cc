package unixsock

import (
	"io/fs"
	"testing"
)

// TestDirACLProblem: every kind of grant to every kind of SID, against
// both checks of Listen (0o022: nobody else may change the directory;
// 0o077: nobody else may reach it).
func TestDirACLProblem(t *testing.T) {
	const me = "S-1-5-21-1-2-3-1001"
	trusted := func(sid string) bool { return sid == me || sid == sidLocalSystem || sid == sidAdministrators }
	masks := map[string]uint32{
		"list": fileListDirectory, "traverse": fileTraverse, "read": genericRead, "execute": genericExecute,
		"add file": fileAddFile, "add dir": fileAddSubdirectory, "delete child": fileDeleteChild, "delete": accessDelete,
		"write dac": writeDAC, "write owner": writeOwner, "generic write": genericWrite, "generic all": genericAll,
	}
	changes := map[string]bool{"add file": true, "add dir": true, "delete child": true, "delete": true, "write dac": true, "write owner": true, "generic write": true, "generic all": true}
	for _, sid := range []string{me, sidLocalSystem, sidAdministrators, "S-1-1-0", "S-1-5-11", "S-1-5-21-1-2-3-1002"} {
		for name, m := range masks {
			for _, deny := range []fs.FileMode{0o022, 0o077} {
				for _, flags := range []uint8{0, aceInheritOnly} {
					for _, allow := range []bool{true, false} {
						err := dirACLProblem(`C:\d`, []ace{{allow: true, mask: fileListDirectory, sid: me}, {allow: allow, flags: flags, mask: m, sid: sid}}, trusted, deny)
						want := allow && flags == 0 && !trusted(sid) && (deny == 0o077 || changes[name])
						if (err != nil) != want {
							t.Errorf("sid %s %s allow=%v flags=%#x deny %o: err %v, want refused %v", sid, name, allow, flags, deny, err, want)
						}
					}
				}
			}
		}
	}
}
