package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/conchsh/conch/internal/base/fsutil"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/policy"
)

// DoctorFix applies the safe fixes of conch doctor (the findings that
// have a fix) and returns what it did, one line each:
//
//   - home.permissions: the home to 0700, its secrets (tokens, the
//     approvals file, the agents and config files, the ledger and its key,
//     a node's identity) to 0600.
//   - home.modes: every other directory in the home (and the fallback
//     socket directory) to 0700, every file to its mode without group and
//     other bits.
//     Files owned by another user are left alone (chown is not safe to
//     guess); Doctor keeps reporting them.
//   - exec.safe_bins_unprofiled: an empty profile {} for every safe bin
//     that is not an interpreter and has none, in the section whose
//     safeBins list names it (tools.exec or agents.<id>.tools.exec).
//
// config.json is rewritten only when the result loads; otherwise it is
// left as it was and the error is returned.
func DoctorFix(home string) ([]string, error) {
	var done []string
	if fi, err := os.Stat(home); err == nil && modeBits && fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(home, 0o700); err != nil {
			return done, err
		}
		done = append(done, fmt.Sprintf("home.permissions: %s 0%o -> 0700", home, fi.Mode().Perm()))
	}
	for _, f := range homeSecrets(home) {
		p := filepath.Join(home, f)
		fi, err := os.Lstat(p)
		if err != nil || !modeBits || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		if uid, ok := fileOwner(fi); ok && uid != os.Getuid() {
			continue
		}
		if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
			return done, err
		}
		done = append(done, fmt.Sprintf("home.permissions: %s 0%o -> 0%o", p, fi.Mode().Perm(), fi.Mode().Perm()&0o700))
	}
	fixed, err := fixModes(home)
	done = append(done, fixed...)
	if err != nil {
		return done, err
	}

	path := filepath.Join(home, "config.json")
	cfg, err := config.Load(path)
	if err != nil {
		return done, nil // config.invalid: nothing safe to do
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return done, nil // no file: the built-in safe bins all have profiles
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return done, nil
	}
	agents := []string{"main"}
	for id := range cfg.Agents {
		if id != "main" {
			agents = append(agents, id)
		}
	}
	slices.Sort(agents)
	var added []string
	for _, agent := range agents {
		set := cfg.Exec(agent)
		for _, b := range policy.UnprofiledSafeBins(set.SafeBins, nil) {
			if slices.Contains(interpreterBins, b) || interpreterBin.MatchString(b) {
				continue
			}
			if _, ok := set.SafeBinProfiles[b]; ok {
				continue
			}
			section := []string{"tools", "exec"}
			if a, ok := cfg.Agents[agent]; ok && a.Tools != nil && a.Tools.Exec.SafeBins != nil {
				section = []string{"agents", agent, "tools", "exec"}
			}
			profiles := mapAt(doc, append(section, "safeBinProfiles")...)
			if _, ok := profiles[b]; ok {
				continue
			}
			profiles[b] = map[string]any{}
			added = append(added, fmt.Sprintf("exec.safe_bins_unprofiled: %s.safeBinProfiles.%s = {}", strings.Join(section, "."), b))
		}
	}
	if len(added) == 0 {
		return done, nil
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return done, err
	}
	err = fsutil.Write(path, append(out, '\n'), fsutil.Options{Perm: 0o600, Check: func(tmp string) error {
		if _, err := config.Load(tmp); err != nil {
			return fmt.Errorf("the fixed config.json would not load (left unchanged): %w", err)
		}
		return nil
	}})
	if err != nil {
		return done, err
	}
	return append(done, added...), nil
}

// mapAt returns the object at keys in doc, creating missing objects (and
// replacing non-objects, which config.Load would have refused).
func mapAt(doc map[string]any, keys ...string) map[string]any {
	m := doc
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	return m
}
