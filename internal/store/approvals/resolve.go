package approvals

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Setting is one effective file value for an agent and where it came from.
type Setting struct {
	Value  string // "" when unset at every level of the file
	Source string // "agents.<id>", `agents."*"` or "defaults"; "" when unset
}

// Rule is an allowlist entry as it applies to an agent.
type Rule struct {
	Entry
	Owner  string // the id of the agent whose list holds the entry: the agent or AnyAgent
	Index  int    // the entry's index in that list as loaded (after normalisation), from 0
	Source string // for explain: "agents.main.allowlist[2]", `agents."*".allowlist[0]`
}

// Resolved is the file's part of an agent's effective policy: each value
// taken from agents.<id>, else agents."*", else defaults, else unset; merging with the
// configured tool values and built-ins is the policy engine's job.
type Resolved struct {
	Agent       string  // the agent resolved; MainAgent when none was named
	Security    Setting // "deny", "allowlist", "full" or unset
	Ask         Setting // "off", "on-miss", "always" or unset
	AskFallback Setting // "deny", "allowlist", "full" or unset

	// Allowlist is the agent's allowlist: the AnyAgent entries followed by the agent's own.
	Allowlist []Rule
}

// Resolve returns the file values that apply to agent ("" means MainAgent). f may be nil
// (no file).
func Resolve(f *File, agent string) Resolved {
	if agent == "" {
		agent = MainAgent
	}
	r := Resolved{Agent: agent}
	if f == nil {
		return r
	}
	own, star := f.Agents[agent], f.Agents[AnyAgent]
	pick := func(get func(*Agent) string, def string) Setting {
		if own != nil && get(own) != "" {
			return Setting{get(own), "agents." + quoteID(agent)}
		}
		if star != nil && get(star) != "" {
			return Setting{get(star), "agents." + quoteID(AnyAgent)}
		}
		if def != "" {
			return Setting{def, "defaults"}
		}
		return Setting{}
	}
	r.Security = pick(func(a *Agent) string { return a.Security }, f.Defaults.Security)
	r.Ask = pick(func(a *Agent) string { return a.Ask }, f.Defaults.Ask)
	r.AskFallback = pick(func(a *Agent) string { return a.AskFallback }, f.Defaults.AskFallback)

	owners := []string{AnyAgent, agent}
	if agent == AnyAgent {
		owners = owners[:1]
	}
	for _, id := range owners {
		a := f.Agents[id]
		if a == nil {
			continue
		}
		for i, e := range a.Allowlist {
			r.Allowlist = append(r.Allowlist, Rule{
				Entry:  e,
				Owner:  id,
				Index:  i,
				Source: fmt.Sprintf("agents.%s.allowlist[%d]", quoteID(id), i),
			})
		}
	}
	return r
}

// SourceAllowAlways is the Entry.Source of entries persisted by allow-always.
const SourceAllowAlways = "allow-always"

// AddAllow persists allow-always patterns: for each of paths (exact
// resolved executable paths, not globs) not already in agent's own allowlist (compared
// trimmed and case-insensitively) it appends an entry with a new id, lastUsedAt now,
// lastUsedCommand command (cut to 500 characters), lastResolvedPath the path and source
// "allow-always". agent "" means MainAgent. The read-modify-write happens under the file
// lock (see [Update]). It returns the entries added, in the order of paths; none when every
// path was present already.
func AddAllow(home, agent string, paths []string, command string) ([]Entry, error) {
	if agent == "" {
		agent = MainAgent
	}
	now := time.Now().UnixMilli()
	var added []Entry
	_, err := Update(home, func(f *File) error {
		added = nil
		a := f.Agents[agent]
		if a == nil {
			a = &Agent{}
		}
		seen := map[string]bool{}
		for _, e := range a.Allowlist {
			seen[patternKey(e.Pattern)] = true
		}
		for _, p := range paths {
			key := patternKey(p)
			if key == "" || seen[key] {
				continue
			}
			seen[key] = true
			e := Entry{
				ID:               newUUID(),
				Pattern:          p,
				LastUsedAt:       now,
				LastUsedCommand:  truncate(command, maxCommandLen),
				LastResolvedPath: p,
				Source:           SourceAllowAlways,
			}
			a.Allowlist = append(a.Allowlist, e)
			added = append(added, e)
		}
		if len(added) > 0 {
			f.Agents[agent] = a
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// Use is one allowlist hit to record with [MarkUsed].
type Use struct {
	Owner        string    // Rule.Owner: whose list holds the entry
	ID           string    // Rule.ID; when no entry has it, the first with Pattern is used
	Pattern      string    // Rule.Pattern
	Command      string    // the command text; cut to 500 characters
	ResolvedPath string    // the executable the pattern matched
	At           time.Time // when
}

// MarkUsed records allowlist hits: lastUsedAt, lastUsedCommand and lastResolvedPath of each
// entry, in one locked read-modify-write (see [Update]). Hits on entries that no longer
// exist are ignored. An entry's id is matched first, then its pattern, because entries
// without an id on disk get a new one at every load. These writes are flushed at most
// every 5 s, so that a busy allowlist does not rewrite the file at every run: the caller batches the hits of that interval into one
// call, keeping the latest per entry.
func MarkUsed(home string, uses []Use) error {
	if len(uses) == 0 {
		return nil
	}
	_, err := Update(home, func(f *File) error {
		for _, u := range uses {
			e := findEntry(f, u)
			if e == nil {
				continue
			}
			if ms := u.At.UnixMilli(); ms >= e.LastUsedAt {
				e.LastUsedAt = ms
				e.LastUsedCommand = truncate(u.Command, maxCommandLen)
				e.LastResolvedPath = u.ResolvedPath
			}
		}
		return nil
	})
	return err
}

func findEntry(f *File, u Use) *Entry {
	owner := u.Owner
	if owner == "" {
		owner = MainAgent
	}
	a := f.Agents[owner]
	if a == nil {
		return nil
	}
	if u.ID != "" {
		for i := range a.Allowlist {
			if a.Allowlist[i].ID == u.ID {
				return &a.Allowlist[i]
			}
		}
	}
	for i := range a.Allowlist {
		if a.Allowlist[i].Pattern == u.Pattern {
			return &a.Allowlist[i]
		}
	}
	return nil
}

// truncate cuts s to at most n characters (runes), keeping it valid UTF-8.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// Import merges src (for example an OpenClaw file read with [Parse]) into f the way
// `conch approvals import` does without --replace: allowlists are unioned
// per agent, deduplicated by trimmed, lower-cased pattern (f's entries first), and policy
// values (security, ask, askFallback, autoAllowSkills) are taken from src only where f's
// are unset. Agents only src has are copied whole. src's unknown top-level members, such
// as OpenClaw's socket, are not imported. It returns the number of entries added.
func (f *File) Import(src *File) int {
	if f.Agents == nil {
		f.Agents = map[string]*Agent{}
	}
	d, s := &f.Defaults, src.Defaults
	d.Security = firstSet(d.Security, s.Security)
	d.Ask = firstSet(d.Ask, s.Ask)
	d.AskFallback = firstSet(d.AskFallback, s.AskFallback)
	if d.AutoAllowSkills == nil {
		d.AutoAllowSkills = s.AutoAllowSkills
	}
	added := 0
	for id, sa := range src.Agents {
		if sa == nil {
			continue
		}
		a := f.Agents[id]
		if a == nil {
			a = &Agent{Extra: sa.Extra}
			f.Agents[id] = a
		}
		a.Security = firstSet(a.Security, sa.Security)
		a.Ask = firstSet(a.Ask, sa.Ask)
		a.AskFallback = firstSet(a.AskFallback, sa.AskFallback)
		seen := map[string]bool{}
		for _, e := range a.Allowlist {
			seen[patternKey(e.Pattern)] = true
		}
		for _, e := range sa.Allowlist {
			key := patternKey(e.Pattern)
			if key == "" || seen[key] {
				continue
			}
			seen[key] = true
			a.Allowlist = append(a.Allowlist, e)
			added++
		}
	}
	return added
}
