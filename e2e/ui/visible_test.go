package ui

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/chromedp/chromedp"
	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/term/visible"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// hiddenPayload is a command holding every character the operator must
// never see raw (every member of visible's classes: all of C0, DEL, C1,
// the format, bidi, separator, space and default-ignorable characters),
// each between markers, generated from the whole code space. NUL is left
// out when noNUL (a file name cannot hold it).
func hiddenPayload(noNUL bool) string {
	var b strings.Builder
	b.WriteString("touch pwn #")
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) || !visible.Hidden(r) || noNUL && r == 0 {
			continue
		}
		b.WriteString("<" + string(r) + ">")
	}
	return b.String()
}

// rawHidden returns the hidden characters s holds raw, allowing those in
// allow.
func rawHidden(s, allow string) []rune {
	var bad []rune
	for _, r := range s {
		if visible.Hidden(r) && !strings.ContainsRune(allow, r) {
			bad = append(bad, r)
		}
	}
	return bad
}

// TestOperatorSeesEscapes: the text an agent controls (its command, its
// working directory) reaches the operator's terminal and the control UI
// only with every hidden character escaped, through every CLI command
// and UI view that shows it; --json keeps the values exactly. The attack
// it generalises: `touch $HOME/pwn #<ESC>[2K<ESC>[1Gecho harmless` showed
// as `echo harmless` in `conch approvals pending`.
func TestOperatorSeesEscapes(t *testing.T) {
	home := e2etest.GatedHome(t, `,"security":"allowlist","ask":"on-miss"`, "")
	g := e2etest.StartGateway(t, home)
	agent := g.MCPClient(g.Token)

	// A working directory whose name holds hidden characters too.
	cwd := filepath.Join(t.TempDir(), "d\x1b[2K\u202ex\r\n\t\u200by")
	if err := os.Mkdir(cwd, 0o700); err != nil {
		t.Fatal(err)
	}
	command := hiddenPayload(true) // the API refuses a NUL: invalid_argument
	r := agent.Exec(map[string]any{"command": command, "workdir": cwd, "background": true})
	id := r.Str("sessionId")
	if r.Str("status") != "approval-pending" || id == "" {
		t.Fatalf("exec: %q %v", r.Text, r.D)
	}

	// A second request whose derived session name (the command's words)
	// holds the C0 controls, DEL and the bidi and zero-width
	// characters: ps shows names.
	var named strings.Builder
	named.WriteString("touch 'A")
	for r := rune(1); r < 0x20; r++ {
		named.WriteRune(r)
	}
	named.WriteString("\x7f\u202e\u200b\ufeff\u2066Z'")
	r2 := agent.Exec(map[string]any{"command": named.String(), "background": true})
	if r2.Str("status") != "approval-pending" {
		t.Fatalf("exec: %q %v", r2.Text, r2.D)
	}
	id2 := r2.Str("sessionId")

	checkText := func(what, out string, want ...string) {
		t.Helper()
		if bad := rawHidden(out, "\n"); len(bad) > 0 {
			t.Errorf("%s: %d hidden characters shown raw, the first %U", what, len(bad), bad[0])
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: missing %q", what, visible.Line(w))
			}
		}
	}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := e2etest.RunCLI(t, nil, append(args, "--home", home)...)
		if code != 0 {
			t.Fatalf("conch %v: exit %d\n%s", args, code, visible.Text(errOut))
		}
		return out + errOut
	}

	// The CLI, for people: every field on its line, escaped.
	checkText("approvals pending", run("approvals", "pending"),
		"\n  command: "+visible.Line(command)+"\n", "\n  cwd: "+visible.Line(cwd)+"\n", "\n  command: "+visible.Line(named.String())+"\n")
	checkText("ledger tail", run("ledger", "tail", "-n", "50"), visible.Line(command))
	checkText("ps", run("ps"), id, id2, " touch A")
	checkText("ps --all-agents", run("ps", "--all-agents"), id, id2, " touch A")

	// --json: exact values, no hidden character raw on the terminal.
	out := run("approvals", "pending", "--json")
	checkText("approvals pending --json", out)
	var list []struct{ Command, Cwd string }
	err := json.Unmarshal([]byte(out), &list)
	exact := 0
	for _, a := range list {
		if a.Command == command && a.Cwd == cwd || a.Command == named.String() {
			exact++
		}
	}
	if err != nil || len(list) != 2 || exact != 2 {
		t.Errorf("approvals pending --json does not keep the values: %v %d %d", err, len(list), exact)
	}
	out = run("ledger", "tail", "--json")
	checkText("ledger tail --json", out)
	if !strings.Contains(out, `"command":`) {
		t.Errorf("ledger tail --json: no command")
	} else {
		var exact bool
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var rec struct{ Command string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Command == command {
				exact = true
			}
		}
		if !exact {
			t.Errorf("ledger tail --json: no record holds the command exactly")
		}
	}

	// The control UI: every text on the page, on every view that shows
	// the request or its session.
	b := newBrowser(t, 1280, 900)
	b.do("sign in", chromedp.Navigate(loginLink(t, home)))
	b.wait("signed in", `location.pathname === "/" && document.querySelector("#overview-approvals") !== null`)
	b.wait("overview lists the request", `document.querySelector("#overview-approvals code") !== null`)
	uiTexts(t, b, "overview")

	b.do("approvals page", chromedp.Navigate(g.Base+"/approvals"))
	b.wait("approval cards", `document.querySelectorAll("#approval-list .approval .cmd").length === 2`)
	for _, c := range []string{command, named.String()} {
		if b.eval(`String([...document.querySelectorAll("#approval-list .approval .cmd")].some(e => e.textContent === `+jsString(visible.Text(c))+`))`) != "true" {
			t.Errorf("UI approval cards: no card shows %q as %q", visible.Line(c), visible.Line(visible.Text(c)))
		}
	}
	b.wait("approval card cwd", `[...document.querySelectorAll("#approval-list .approval dd.mono")].some(e => e.textContent === `+jsString(visible.Line(cwd))+`)`)
	uiTexts(t, b, "approvals")

	b.do("sessions page", chromedp.Navigate(g.Base+"/sessions"))
	b.wait("sessions list", `document.body.innerText.includes(`+jsString(id)+`)`)
	uiTexts(t, b, "sessions")

	b.do("session page", chromedp.Navigate(g.Base+"/sessions/"+id+"?agent=main"))
	b.wait("session page", `document.getElementById("state-badge") !== null && document.getElementById("state-badge").textContent !== ""`)
	uiTexts(t, b, "session")

	// Denied from the approvals page: the decision history shows it too.
	b.do("approvals page again", chromedp.Navigate(g.Base+"/approvals"))
	b.wait("approval card", `document.querySelector("#approval-list .approval button[data-decision=deny]") !== null`)
	b.do("deny", chromedp.Click(`#approval-list .approval button[data-decision=deny]`))
	b.wait("history row", `document.querySelectorAll("#history tbody tr").length > 0`)
	uiTexts(t, b, "approvals history")
	b.checkConsole()
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// uiTexts fails t when a text node or a label of the page b shows holds a
// hidden character raw (tab and newline allowed in a pre or a command
// block), outside the output terminals.
func uiTexts(t *testing.T, b *browser, view string) {
	t.Helper()
	var texts []struct {
		Text  string `json:"text"`
		Multi bool   `json:"multi"`
	}
	js := `JSON.stringify((() => {
	  const out = [], w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	  for (let n; (n = w.nextNode());) {
	    const p = n.parentElement;
	    if (!p || p.closest(".xterm, script, style") || /^[ \n\t]*$/.test(n.data)) continue;
	    out.push({ text: n.data, multi: !!p.closest("pre, .cmd") });
	  }
	  for (const e of document.querySelectorAll("[title], [aria-label], [placeholder]"))
	    for (const a of ["title", "aria-label", "placeholder"]) if (e.hasAttribute(a)) out.push({ text: e.getAttribute(a), multi: false });
	  return out;
	})())`
	if err := json.Unmarshal([]byte(b.eval(js)), &texts); err != nil {
		t.Fatalf("%s: %v", view, err)
	}
	for _, x := range texts {
		allow := ""
		if x.Multi {
			allow = "\n\t"
		}
		if bad := rawHidden(x.Text, allow); len(bad) > 0 {
			t.Errorf("UI %s: %U shown raw in %q", view, bad[0], visible.Line(x.Text))
			return
		}
	}
}

// hiddenSample is the first and the last character of every range of every class of
// visible.Classes that is not a control (a node's hello fields lose their
// controls at the gateway), every third from start: the three samples
// fit fields of 256 bytes and together hold every range.
func hiddenSample(start int) string {
	var all []rune
	seen := map[rune]bool{}
	add := func(r rune) {
		if !seen[r] && r != ' ' && !unicode.IsControl(r) && visible.Hidden(r) {
			seen[r] = true
			all = append(all, r)
		}
	}
	for _, tab := range visible.Classes {
		for _, r := range tab.R16 {
			add(rune(r.Lo))
			add(rune(r.Hi))
		}
		for _, r := range tab.R32 {
			add(rune(r.Lo))
			add(rune(r.Hi))
		}
	}
	var b strings.Builder
	for i := start; i < len(all); i += 3 {
		b.WriteRune(all[i])
	}
	return b.String()
}

// TestNodeFieldsEscaped: what a node reports in its hello (platform,
// architecture, version) reaches `conch nodes list` and the UI's nodes
// page only escaped, and `nodes list --json` keeps it exactly. The
// gateway strips controls from these fields, not format characters: a
// right-to-left override in a platform reached the operator's terminal.
func TestNodeFieldsEscaped(t *testing.T) {
	gh := e2etest.NewHome(t, e2etest.NodeGatewayConfig)
	g := e2etest.StartNodeGateway(t, gh, "127.0.0.1:0")
	tok := g.Invite("1h", false)
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	platform, arch, version := "linux"+hiddenSample(0), "amd64"+hiddenSample(1), "1"+hiddenSample(2)
	if len(platform) > 256 || len(arch) > 256 || len(version) > 256 || !strings.ContainsRune(platform+arch+version, '\u202e') {
		t.Fatalf("samples of %d, %d, %d bytes", len(platform), len(arch), len(version))
	}
	if code := e2etest.HandHello(t, g, tok, pub, key, "hidden-fields", func(h *apitype.NodeHello, _ string) {
		h.Platform, h.Arch, h.Version = platform, arch, version
	}); code != 0 {
		t.Fatalf("hello refused: %d", code)
	}
	out, errOut, code := e2etest.RunCLI(t, nil, "nodes", "list", "--home", gh)
	if code != 0 {
		t.Fatalf("nodes list: %d %s", code, errOut)
	}
	if bad := rawHidden(out, "\n"); len(bad) > 0 {
		t.Errorf("nodes list: %U shown raw", bad[0])
	}
	if !strings.Contains(out, visible.Line(platform)+"/"+visible.Line(arch)) {
		t.Errorf("nodes list does not show the platform escaped:\n%s", out)
	}
	out, _, _ = e2etest.RunCLI(t, nil, "nodes", "list", "--home", gh, "--json")
	if bad := rawHidden(out, "\n"); len(bad) > 0 {
		t.Errorf("nodes list --json: %U shown raw", bad[0])
	}
	if !strings.Contains(out, `"platform":`) {
		t.Fatalf("nodes list --json: %s", out)
	}
	var res struct {
		Nodes []struct{ Platform, Arch string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Nodes) != 1 || res.Nodes[0].Platform != platform || res.Nodes[0].Arch != arch {
		t.Errorf("nodes list --json does not keep the values: %v %+v", err, res.Nodes)
	}

	b := newBrowser(t, 1280, 900)
	b.do("sign in", chromedp.Navigate(loginLink(t, gh)))
	b.wait("signed in", `location.pathname === "/"`)
	b.do("nodes page", chromedp.Navigate(g.Base+"/nodes"))
	b.wait("nodes page lists the request", `document.body.innerText.includes("hidden-fields")`)
	if b.eval(`String([...document.querySelectorAll("#nodes-body td")].some(e => e.textContent === `+jsString(visible.Line(platform)+"/"+visible.Line(arch))+`))`) != "true" {
		t.Errorf("UI nodes page: no cell shows the platform escaped")
	}
	uiTexts(t, b, "nodes")
	b.checkConsole()
}
