package policy

import "testing"

// TestOptionTablesCoverProfiles: every tool with a built-in profile has an
// option table, and every flag a built-in profile names exists in it.
func TestOptionTablesCoverProfiles(t *testing.T) {
	for name, p := range BuiltinProfiles {
		table, ok := builtinTables[name]
		if !ok {
			t.Errorf("profile %s has no option table", name)
			continue
		}
		for _, list := range [][]string{p.AllowedValueFlags, p.AllowedBoolFlags, p.DeniedFlags} {
			for _, f := range list {
				found := false
				for _, names := range table.names {
					for _, n := range names {
						found = found || n == f
					}
				}
				if !found {
					t.Errorf("profile %s names %s: not an option of %s", name, f, name)
				}
			}
		}
	}
}
