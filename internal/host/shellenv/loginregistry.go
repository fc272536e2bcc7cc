package shellenv

import "strings"

// loginRegistryPATH joins the machine's and the user's registry Path as
// Windows does at logon: the machine's entries first, then the user's,
// each list split on ';' with empty entries dropped (a trailing ';' is
// common) and nothing else changed: no entry is removed for appearing
// twice, as Windows removes none.
func loginRegistryPATH(machine, user string) string {
	var out []string
	for _, list := range []string{machine, user} {
		for _, e := range strings.Split(list, ";") {
			if strings.TrimSpace(e) != "" {
				out = append(out, e)
			}
		}
	}
	return strings.Join(out, ";")
}
