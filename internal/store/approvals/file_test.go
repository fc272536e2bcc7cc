package approvals

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const openclawFile = `{
  "version": 1,
  "socket": { "path": "~/.openclaw/exec-approvals.sock", "token": "tok" },
  "defaults": { "security": "allowlist", "ask": "on-miss", "askFallback": "deny", "autoAllowSkills": false, "future": [1, 2] },
  "agents": {
    "*": { "allowlist": [ { "id": "a1", "pattern": "/usr/bin/git" } ] },
    "main": {
      "security": "allowlist", "ask": "on-miss", "askFallback": "deny", "autoAllowSkills": true,
      "allowlist": [
        { "id": "6f1c", "pattern": "~/Projects/**/bin/rg", "lastUsedAt": 1737150000000,
          "lastUsedCommand": "rg -n TODO", "lastResolvedPath": "/home/u/Projects/x/bin/rg",
          "note": {"by": "openclaw", "tags": ["x"]} }
      ]
    }
  }
}
`

func writeFile(t *testing.T, home, content string) {
	t.Helper()
	if err := os.WriteFile(Path(home), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadMissing(t *testing.T) {
	f, err := Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if f.Exists() || f.Version != 1 || len(f.Agents) != 0 {
		t.Fatalf("got %+v exists=%v", f, f.Exists())
	}
	if got, want := f.Hash(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Fatalf("hash of missing file = %s, want %s", got, want)
	}
}

func TestRoundTripUnknownFields(t *testing.T) {
	home := t.TempDir()
	writeFile(t, home, openclawFile)
	f, err := Load(home)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Exists() || f.Hash() != hashBytes([]byte(openclawFile)) {
		t.Fatalf("exists=%v hash=%s", f.Exists(), f.Hash())
	}
	f.Agents["main"].Allowlist = append(f.Agents["main"].Allowlist, Entry{Pattern: "/usr/bin/make"})
	if err := Save(home, f, f.Hash()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(Path(home))
	if err != nil {
		t.Fatal(err)
	}
	if f.Hash() != hashBytes(data) {
		t.Fatal("Hash after Save is not the hash of the bytes on disk")
	}
	if !strings.HasSuffix(string(data), "}\n") || !strings.Contains(string(data), "\n  \"agents\": {") {
		t.Fatalf("not pretty JSON with a trailing newline:\n%s", data)
	}
	var before, after map[string]any
	json.Unmarshal([]byte(openclawFile), &before)
	if err := json.Unmarshal(data, &after); err != nil {
		t.Fatal(err)
	}
	// Everything that was there is still there, unchanged, apart from the added entry.
	main := after["agents"].(map[string]any)["main"].(map[string]any)
	list := main["allowlist"].([]any)
	if len(list) != 2 || list[1].(map[string]any)["pattern"] != "/usr/bin/make" || list[1].(map[string]any)["id"] == "" {
		t.Fatalf("allowlist after save: %v", list)
	}
	main["allowlist"] = list[:1]
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("round trip changed the file:\nbefore %v\nafter  %v", before, after)
	}
}

func TestNormalisation(t *testing.T) {
	home := t.TempDir()
	writeFile(t, home, `{"version": 1, "agents": {
		"default": {"security": "full", "ask": "always", "allowlist": ["/bin/ls", {"pattern": " /USR/BIN/GIT "}, {"id": "x"}, 7, {"pattern": ""}]},
		"main": {"ask": "off", "allowlist": [{"pattern": "/usr/bin/git", "id": "keep"}, "  "]}
	}}`)
	before, _ := os.ReadFile(Path(home))
	f, err := Load(home)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Agents["default"]; ok {
		t.Fatal("legacy default agent not merged")
	}
	m := f.Agents["main"]
	if m.Security != "full" || m.Ask != "off" {
		t.Fatalf("merged policy: security %q ask %q; want full, off (main wins)", m.Security, m.Ask)
	}
	var patterns []string
	for _, e := range m.Allowlist {
		patterns = append(patterns, e.Pattern)
		if e.ID == "" {
			t.Fatalf("entry %q has no id", e.Pattern)
		}
	}
	if want := []string{"/usr/bin/git", "/bin/ls"}; !reflect.DeepEqual(patterns, want) {
		t.Fatalf("patterns %q, want %q", patterns, want)
	}
	if m.Allowlist[0].ID != "keep" || !isUUID(m.Allowlist[1].ID) {
		t.Fatalf("ids %q %q", m.Allowlist[0].ID, m.Allowlist[1].ID)
	}
	after, _ := os.ReadFile(Path(home))
	if string(before) != string(after) {
		t.Fatal("Load wrote the file")
	}
}

func TestUnreadable(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"empty", "", "unexpected end of JSON input"},
		{"syntax", "{", "unexpected end of JSON input"},
		{"array", "[]", "cannot unmarshal"},
		{"null", "null", "not a JSON object"},
		{"no version", `{"agents":{}}`, "missing version"},
		{"version 2", `{"version":2}`, "unsupported version 2"},
		{"version string", `{"version":"1"}`, "version: not a number"},
		{"bad security", `{"version":1,"agents":{"main":{"security":"ful"}}}`, `agents.main.security: invalid value "ful"`},
		{"bad ask", `{"version":1,"defaults":{"ask":"sometimes"}}`, `defaults.ask: invalid value`},
		{"bad allowlist", `{"version":1,"agents":{"*":{"allowlist":{}}}}`, `agents."*".allowlist: not an array`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			writeFile(t, home, tc.content)
			_, err := Load(home)
			var ue *UnreadableError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want *UnreadableError", err)
			}
			if ue.Path != Path(home) || !strings.HasPrefix(err.Error(), "approvals file unreadable (") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q (path %q), want it to contain %q", err, ue.Path, tc.want)
			}
			// Update refuses to overwrite it.
			_, err = Update(home, func(*File) error { t.Fatal("fn called"); return nil })
			if !errors.As(err, &ue) {
				t.Fatalf("Update err = %v", err)
			}
			if got, _ := os.ReadFile(Path(home)); string(got) != tc.content {
				t.Fatal("unreadable file was overwritten")
			}
		})
	}
}

func TestSaveConflict(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	f, err := Load(home)
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults.Security = "allowlist"
	if err := Save(home, f, ""); err != nil {
		t.Fatalf("save of a missing file with empty baseHash: %v", err)
	}
	st, err := os.Stat(home)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("home mode %v, %v; want 0700", st.Mode(), err)
	}
	st, err = os.Stat(Path(home))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v; want 0600", st.Mode(), err)
	}

	stale := f.Hash()
	f2, _ := Load(home)
	f2.Defaults.Ask = "always"
	if err := Save(home, f2, stale); err != nil {
		t.Fatal(err)
	}
	on := func() string { b, _ := os.ReadFile(Path(home)); return string(b) }
	disk := on()
	f.Defaults.Ask = "off"
	if err := Save(home, f, stale); !errors.Is(err, ErrConflict) || err.Error() != "exec approvals changed; reload and retry" {
		t.Fatalf("stale save: %v, want ErrConflict", err)
	}
	if err := Save(home, f, ""); !errors.Is(err, ErrConflict) {
		t.Fatalf("empty baseHash on an existing file: %v, want ErrConflict", err)
	}
	if on() != disk {
		t.Fatal("conflicting save wrote")
	}
	if err := Save(home, f, strings.ToUpper(f2.Hash())); err != nil {
		t.Fatalf("save with the current hash: %v", err)
	}
	// Invalid files are refused.
	f.Agents["main"] = &Agent{Security: "most"}
	if err := Save(home, f, f.Hash()); err == nil || !strings.Contains(err.Error(), "invalid value") {
		t.Fatalf("invalid save: %v", err)
	}
	if matches, _ := filepath.Glob(filepath.Join(home, ".*.tmp")); len(matches) != 0 {
		t.Fatalf("temporary files left: %v", matches)
	}
}

func TestResolve(t *testing.T) {
	f, err := Parse([]byte(`{"version":1,
		"defaults":{"security":"full","ask":"always","askFallback":"allowlist"},
		"agents":{
			"*":{"ask":"on-miss","allowlist":[{"id":"s0","pattern":"/usr/bin/git"}]},
			"main":{"security":"allowlist","allowlist":[{"id":"m0","pattern":"/bin/ls"},{"id":"m1","pattern":"/bin/cat"}]}
		}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := Resolve(f, "")
	if r.Agent != "main" ||
		r.Security != (Setting{"allowlist", "agents.main"}) ||
		r.Ask != (Setting{"on-miss", `agents."*"`}) ||
		r.AskFallback != (Setting{"allowlist", "defaults"}) {
		t.Fatalf("resolved %+v", r)
	}
	var got []string
	for _, rule := range r.Allowlist {
		got = append(got, rule.Source+" "+rule.Pattern+" "+rule.Owner)
	}
	want := []string{`agents."*".allowlist[0] /usr/bin/git *`, "agents.main.allowlist[0] /bin/ls main", "agents.main.allowlist[1] /bin/cat main"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("allowlist\n got %q\nwant %q", got, want)
	}
	other := Resolve(f, "ops")
	if other.Security != (Setting{"full", "defaults"}) || len(other.Allowlist) != 1 {
		t.Fatalf("ops: %+v", other)
	}
	if r := Resolve(nil, "x"); r.Security != (Setting{}) || r.Allowlist != nil {
		t.Fatalf("nil file: %+v", r)
	}
	if r := Resolve(f, "*"); len(r.Allowlist) != 1 {
		t.Fatalf("agent *: %d entries", len(r.Allowlist))
	}
}

func TestAddAllowAndMarkUsed(t *testing.T) {
	home := t.TempDir()
	writeFile(t, home, `{"version":1,"socket":{"path":"x"},"agents":{"main":{"allowlist":[{"pattern":"/usr/bin/GIT","id":"g"}]}}}`)
	long := strings.Repeat("é", 600)
	added, err := AddAllow(home, "", []string{"/usr/bin/git", "/usr/bin/curl", "/usr/bin/curl", " "}, long)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 1 {
		t.Fatalf("added %+v, want only curl", added)
	}
	e := added[0]
	if e.Pattern != "/usr/bin/curl" || e.LastResolvedPath != "/usr/bin/curl" || e.Source != "allow-always" ||
		!isUUID(e.ID) || e.LastUsedAt == 0 || len([]rune(e.LastUsedCommand)) != 500 {
		t.Fatalf("entry %+v", e)
	}
	f, err := Load(home)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.Agents["main"].Allowlist); n != 2 || f.Extra["socket"] == nil {
		t.Fatalf("after AddAllow: %d entries, extra %v", n, f.Extra)
	}
	hash := f.Hash()
	added, err = AddAllow(home, "main", []string{"/USR/BIN/CURL"}, "x")
	if err != nil || len(added) != 0 {
		t.Fatalf("second AddAllow: %v %v", added, err)
	}
	if f, _ := Load(home); f.Hash() != hash {
		t.Fatal("no-op AddAllow rewrote the file")
	}

	at := time.UnixMilli(1800000000000)
	err = MarkUsed(home, []Use{
		{Owner: "main", ID: "g", Command: "git status", ResolvedPath: "/usr/bin/git", At: at},
		{Owner: "main", ID: "gone", Pattern: "/usr/bin/curl", Command: "curl x", ResolvedPath: "/usr/bin/curl", At: at},
		{Owner: "nobody", Pattern: "/x", At: at},
	})
	if err != nil {
		t.Fatal(err)
	}
	f, _ = Load(home)
	want := map[string]string{"/usr/bin/GIT": "git status", "/usr/bin/curl": "curl x"}
	for _, e := range f.Agents["main"].Allowlist {
		if e.LastUsedAt != at.UnixMilli() || e.LastUsedCommand != want[e.Pattern] {
			t.Fatalf("entry after MarkUsed: %+v", e)
		}
	}
}

func TestImport(t *testing.T) {
	dst, _ := Parse([]byte(`{"version":1,"defaults":{"ask":"always"},"agents":{"main":{"allowlist":["/bin/ls"]}}}`))
	src, err := Parse([]byte(openclawFile))
	if err != nil {
		t.Fatal(err)
	}
	src.Agents["main"].Allowlist = append(src.Agents["main"].Allowlist, Entry{ID: "z", Pattern: "/BIN/LS"})
	if n := dst.Import(src); n != 2 {
		t.Fatalf("imported %d entries, want 2", n)
	}
	if dst.Defaults.Ask != "always" || dst.Defaults.Security != "allowlist" || dst.Extra["socket"] != nil {
		t.Fatalf("defaults %+v extra %v", dst.Defaults, dst.Extra)
	}
	if got := len(dst.Agents["main"].Allowlist); got != 2 || dst.Agents["main"].Security != "allowlist" {
		t.Fatalf("main: %+v", dst.Agents["main"])
	}
}

func TestParseDecision(t *testing.T) {
	for in, want := range map[string]Decision{
		"allow": AllowOnce, "once": AllowOnce, "allow-once": AllowOnce, " Allow-Once ": AllowOnce,
		"always": AllowAlways, "allow-always": AllowAlways,
		"deny": Deny, "reject": Deny, "block": Deny,
	} {
		if got, err := ParseDecision(in); got != want || err != nil {
			t.Errorf("ParseDecision(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "approve", "yes", "timeout", "allowonce"} {
		if _, err := ParseDecision(in); err == nil {
			t.Errorf("ParseDecision(%q) succeeded", in)
		}
	}
}

func TestFileJSON(t *testing.T) {
	var body struct {
		File     *File  `json:"file"`
		BaseHash string `json:"baseHash"`
	}
	if err := json.Unmarshal([]byte(`{"file":`+openclawFile+`,"baseHash":"x"}`), &body); err != nil {
		t.Fatal(err)
	}
	if body.File.Agents["main"].Allowlist[0].LastUsedCommand != "rg -n TODO" || body.File.Extra["socket"] == nil {
		t.Fatalf("decoded %+v", body.File)
	}
	out, err := json.Marshal(body)
	if err != nil || !strings.HasPrefix(string(out), `{"file":{"version":1,"defaults":{"security":"allowlist"`) {
		t.Fatalf("encoded %s %v", out, err)
	}
	var ue *UnreadableError
	if err := json.Unmarshal([]byte(`{"file":{"version":3}}`), &body); !errors.As(err, &ue) {
		t.Fatalf("bad file: %v", err)
	}
}
