package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// browser is a headless Chromium driven over CDP, with the page's console
// collected.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string // screenshots

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

// chromium returns the path of a Chromium binary, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH (apt-get install chromium): the control UI browser tests need it")
	return ""
}

// artifactDir is where screenshots go: $CONCH_TEST_ARTIFACTS/<test>, else
// a directory under t.TempDir().
func artifactDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("CONCH_TEST_ARTIFACTS")
	if base == "" {
		base = t.TempDir()
	}
	dir := filepath.Join(base, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, e2etest.Slow(150*time.Second))
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	b := &browser{t: t, ctx: ctx, dir: artifactDir(t)}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// do runs actions, failing the test with a screenshot on error.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, e2etest.Slow(30*time.Second))
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.shot("failure-" + regexp.MustCompile(`\W+`).ReplaceAllString(what, "-"))
		html, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string]("document.getElementById('main') ? document.getElementById('main').innerText : ''"))
		b.t.Fatalf("%s: %v\npage text:\n%s\nconsole: %v", what, err, html, b.messages())
	}
}

// wait polls a JavaScript predicate.
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, e2etest.Slow(30*time.Second))
	defer cancel()
	safe := "(() => { try { return !!(" + expr + "); } catch (e) { return false; } })()"
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](safe, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(e2etest.Slow(25*time.Second)))); err != nil {
		b.shot("failure-" + regexp.MustCompile(`\W+`).ReplaceAllString(what, "-"))
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string]("document.body.innerText"))
		b.t.Fatalf("waiting for %s (%s): %v\npage text:\n%s\nconsole: %v", what, expr, err, text, b.messages())
	}
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644); err != nil {
		b.t.Log(err)
	}
}

func (b *browser) messages() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.console {
		out = append(out, fmt.Sprintf("[%s %s] %s (%s)", m.Type, m.Source, m.Text, m.URL))
	}
	return out
}

// checkConsole fails on any console error, warning or exception except
// the browser's network log lines for the answers listed in allowed
// ("URL-substring status"), which the test provoked on purpose.
func (b *browser) checkConsole(allowed ...string) {
	b.t.Helper()
	time.Sleep(200 * time.Millisecond)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.console {
		if m.Type != "error" && m.Type != "warning" && !m.IsException() && m.Type != "assert" {
			continue
		}
		ok := false
		for _, a := range allowed {
			u, status, _ := strings.Cut(a, " ")
			if m.Source == "network" && strings.Contains(m.URL, u) && strings.Contains(m.Text, "status of "+status+" ") {
				ok = true
			}
		}
		if !ok {
			b.t.Errorf("console %s (%s): %s at %s:%d", m.Type, m.Source, m.Text, m.URL, m.Line)
		}
	}
}

// loginLink runs `conch ui --print` against the gateway of home.
func loginLink(t *testing.T, home string) string {
	t.Helper()
	out, err := exec.Command(e2etest.ConchBin, "ui", "--home", home, "--print").Output()
	if err != nil {
		t.Fatalf("conch ui: %v", err)
	}
	link := strings.TrimSpace(string(out))
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/login#code=clc_[A-Za-z0-9_-]{43}$`).MatchString(link) {
		t.Fatalf("login link %q", link)
	}
	return link
}

func js(s string) string { return fmt.Sprintf("%q", s) }

// overflowJS names the elements whose right edge is past the viewport,
// outside the containers that scroll sideways by design.
const overflowJS = `(() => {
  const w = document.documentElement.clientWidth;
  const bad = [...document.querySelectorAll("body *")].filter(e => {
    if (e.closest(".scroll, pre, .xterm, textarea, #toast")) return false;
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.right > w + 1;
  });
  return bad.slice(0, 5).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className ? "." + e.className : "") + " right=" + Math.round(e.getBoundingClientRect().right)).join(", ") +
    (document.documentElement.scrollWidth > w ? " scrollWidth=" + document.documentElement.scrollWidth : "");
})()`

// setText sets an input's value as typing would (an input event follows).
func setText(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const e = document.querySelector(%s); e.value = %s; return e.dispatchEvent(new Event("input")); })()`, js(sel), js(value)))(ctx, t)
		return err
	})
}

// TestUIApproveStreamKill is the operator's main path in the browser:
// sign in with a login link, see an agent's exec request arrive live,
// approve it with the keyboard, watch and feed the session's output, kill
// it; then the policy editor's conflict handling, the nodes page without
// node hosts, the phone layout and sign-out.
// outputRows is a JavaScript expression: the rows of the session page's
// output terminal (xterm.js), one line each.
const outputRows = `(document.querySelector("#output .xterm-rows") ? [...document.querySelectorAll("#output .xterm-rows > div")].map(d => d.textContent.trimEnd()).join("\n") : "")`

func TestUIApproveStreamKill(t *testing.T) {
	home := e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","ask":"always"}}}`)
	g := e2etest.StartGateway(t, home)
	b := newBrowser(t, 1280, 900)

	// A login link works once.
	link := loginLink(t, home)
	b.do("open login link", chromedp.Navigate(link))
	b.wait("signed in", `location.pathname === "/" && document.querySelector("#overview-approvals").innerText.includes("Nothing waiting")`)
	if h := b.eval(`location.hash`); h != "" {
		t.Fatalf("login code left in the URL: %q", h)
	}
	cs, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range cs.Cookies {
		if c.Name == "conch_ui" {
			found = true
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict {
				t.Fatalf("cookie attributes: %+v", c)
			}
		}
	}
	if !found {
		t.Fatal("no conch_ui cookie")
	}
	if code, m := g.Do("POST", "/v1/ui/session", "", map[string]any{"code": strings.SplitN(link, "#code=", 2)[1]}, nil); code != 401 {
		t.Fatalf("login code reused: %d %v", code, m)
	}

	// An agent asks over MCP; the request appears live.
	agent := g.MCPClient(g.Token)
	cmd := `printf '\033[31mred-950\033[0m plain\n'; head -n 1; echo after-input-950; sleep 950.1`
	r := agent.Exec(map[string]any{"command": cmd, "background": true})
	if r.Str("status") != "approval-pending" {
		t.Fatalf("exec: %s %v", r.Text, r.D)
	}
	slug, sid := r.Str("approvalSlug"), r.Str("sessionId")
	b.wait("overview lists the request", fmt.Sprintf(`document.querySelector("#overview-approvals").innerText.includes(%s)`, js(slug)))
	b.shot("00-overview")
	b.do("approvals page", chromedp.Click(`nav a[data-nav="approvals"]`))
	b.wait("approval card", fmt.Sprintf(`[...document.querySelectorAll(".approval")].some(c => c.innerText.includes(%s) && c.innerText.includes("head -n 1"))`, js(slug)))
	b.wait("explain text", `document.querySelector(".approval pre.explain").textContent.includes("verdict")`)
	card := b.eval(`document.querySelector(".approval").innerText`)
	for _, want := range []string{"main", "gateway", "/usr/bin/head", "Allow once", "Always allow", "Deny", "left"} {
		if !strings.Contains(card, want) {
			t.Errorf("approval card lacks %q:\n%s", want, card)
		}
	}
	b.do("open explain", chromedp.Click(".approval details summary"))
	b.shot("01-approval-pending")

	// Keyboard: focus the card, press o (allow once).
	b.do("allow once by keyboard", chromedp.Focus(".approval"), chromedp.KeyEvent("o"))
	b.wait("card gone", `!document.querySelector(".approval")`)
	b.wait("history row", fmt.Sprintf(`document.querySelector("#history").innerText.includes(%s) && document.querySelector("#history").innerText.includes("allow-once") && document.querySelector("#history").innerText.includes("ui:operator")`, js(slug)))
	b.shot("02-approval-history")

	// Sessions list, then the session view.
	b.do("sessions page", chromedp.Click(`nav a[data-nav="sessions"]`))
	b.wait("session row", fmt.Sprintf(`!!document.querySelector('#sessions tr[data-id=%s]')`, js(sid)))
	b.wait("session running", fmt.Sprintf(`document.querySelector('#sessions tr[data-id=%s]').innerText.includes("running")`, js(sid)))
	b.shot("03-sessions")
	b.do("open session", chromedp.Click(fmt.Sprintf(`#sessions tr[data-id=%s] a`, js(sid))))
	// A pipe session's output is drawn by a read-only xterm.js terminal.
	b.wait("output streamed", outputRows+`.includes("red-950 plain")`)
	if c := b.eval(`(() => { const s = [...document.querySelectorAll("#output .xterm-rows span")].find(s => s.textContent === "red-950"); return s ? getComputedStyle(s).color : "none"; })()`); c != "rgb(205, 49, 49)" {
		t.Errorf("ANSI red not rendered: %q (output %q)", c, b.eval(`document.querySelector("#output .xterm-rows").innerHTML`))
	}
	if rows := b.eval(outputRows); strings.Contains(rows, "[31m") || strings.Contains(rows, "\x1b") {
		t.Errorf("escapes shown as text in the output view: %q", rows)
	}
	// Output that the command prints after the page opened, driven by
	// input sent from the page, arrives live.
	b.do("send input", chromedp.SendKeys("#input", "hello-from-ui-950\r"))
	b.wait("live output", outputRows+`.includes("hello-from-ui-950\nafter-input-950")`)
	b.do("search", chromedp.SendKeys("#search", "after-input\r"))
	b.wait("search results", `document.querySelector("#search-results").innerText.includes("after-input-950")`)
	b.shot("04-session-live")
	if n := len(e2etest.Pgrep(`^sleep 950\.1`)); n != 1 {
		t.Fatalf("sleep 950.1 processes before kill: %d", n)
	}
	b.do("kill", chromedp.Click("#kill"))
	b.wait("killed", `document.querySelector("#end-state").textContent.includes("killed") && document.querySelector("#state-badge").innerText.includes("killed")`)
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := e2etest.Pgrep(`^sleep 950\.1`); len(p) != 0 {
			return fmt.Sprintf("sleep 950.1 still running: %v", p)
		}
		return ""
	})
	if code, m := g.Do("GET", "/v1/sessions/"+sid, g.Token, nil, nil); code != 200 || m["killedBy"] != "operator" {
		t.Fatalf("session after UI kill: %d %v", code, m)
	}
	b.shot("05-session-killed")
	b.do("ledger link", chromedp.Click("#ledger-link"))
	b.wait("session's ledger records", `document.querySelector("#ledger-session").value.length > 0 && document.querySelector("#ledger").innerText.includes("killed") && document.querySelector("#ledger").innerText.includes("allow-once by ui:operator")`)

	// Policy: validation, then a conflicting write from elsewhere.
	b.do("policy page", chromedp.Click(`nav a[data-nav="policy"]`))
	b.wait("policy loaded", `document.querySelector("#policy-text").value.includes('"version": 1')`)
	b.do("invalid edit", setText("#policy-text", `{"version": 2}`))
	b.wait("validation error", `document.querySelector("#policy-errors").innerText.includes("version must be 1") && document.querySelector("#policy-save").disabled`)
	mine := `{"version": 1, "defaults": {"ask": "on-miss"}, "agents": {"main": {"allowlist": [{"pattern": "/usr/bin/true"}]}}}`
	b.do("valid edit", setText("#policy-text", mine))
	b.wait("save enabled", `!document.querySelector("#policy-save").disabled && document.querySelector("#policy-errors").children.length === 0`)
	code, cur := g.Do("GET", "/v1/approvals-file", g.Operator, nil, nil)
	if code != 200 {
		t.Fatalf("approvals-file: %d %v", code, cur)
	}
	if code, m := g.Do("PUT", "/v1/approvals-file", g.Operator, map[string]any{"file": map[string]any{"version": 1, "defaults": map[string]any{"security": "allowlist"}}, "baseHash": cur["hash"]}, nil); code != 200 {
		t.Fatalf("concurrent write: %d %v", code, m)
	}
	b.do("save", chromedp.Click("#policy-save"))
	b.wait("conflict shown", `!!document.querySelector("#policy-conflict") && document.querySelector("#policy-text").value.includes("/usr/bin/true")`)
	b.shot("06-policy-conflict")
	b.do("overwrite", chromedp.Click("#policy-overwrite"))
	b.wait("saved", `!document.querySelector("#policy-conflict") && document.querySelector("#policy-text").value.includes("/usr/bin/true")`)
	raw, err := os.ReadFile(filepath.Join(home, "exec-approvals.json"))
	if err != nil || !strings.Contains(string(raw), "/usr/bin/true") || strings.Contains(string(raw), `"security"`) {
		t.Fatalf("approvals file after overwrite: %v %s", err, raw)
	}
	b.do("explain", chromedp.SendKeys("#explain-command", "true\r"))
	b.wait("explain answer", `document.querySelector("#explain-out").textContent.includes("/usr/bin/true")`)

	// Nodes: the gateway's node hub answers; none is paired yet.
	b.do("nodes page", chromedp.Click(`nav a[data-nav="nodes"]`))
	b.wait("nodes list", `document.querySelector("#nodes-body").innerText.includes("Pending pairing (0)") && document.querySelector("#bindings").innerText.includes("main")`)
	b.shot("07-nodes-empty")

	// Agents: create one (its token is shown once), set its exec defaults.
	b.do("agents page", chromedp.Click(`nav a[data-nav="agents"]`))
	b.wait("agents listed", `!!document.querySelector('#agents tr[data-agent="main"]')`)
	b.do("create agent", chromedp.SendKeys("#agent-name", "ci-950"), chromedp.SendKeys("#agent-workspace", "/tmp\r"))
	b.wait("token shown", `/cat_[A-Za-z0-9_-]{43}/.test(document.querySelector("#agent-token").innerText) && !!document.querySelector('#agents tr[data-agent="ci-950"]')`)
	tok := regexp.MustCompile(`cat_[A-Za-z0-9_-]{43}`).FindString(b.eval(`document.querySelector("#agent-token").innerText`))
	if code, _ := g.Do("GET", "/v1/sessions", tok, nil, nil); code != 200 {
		t.Fatalf("the token shown does not work: %d", code)
	}
	b.do("set defaults", chromedp.SetValue(`#agents tr[data-agent="ci-950"] select[data-key="ask"]`, "always"),
		chromedp.Click(`#agents tr[data-agent="ci-950"] td:nth-child(3) button`))
	e2etest.Eventually(t, 5*time.Second, func() string {
		if _, m := g.Do("GET", "/v1/agents/ci-950/exec-defaults", g.Operator, nil, nil); m["ask"] != "always" {
			return fmt.Sprintf("exec defaults: %v", m)
		}
		return ""
	})
	b.shot("07b-agents")

	// Ledger: the records of this test, and an intact chain.
	b.do("ledger page", chromedp.Click(`nav a[data-nav="ledger"]`))
	b.wait("ledger records", fmt.Sprintf(`document.querySelector("#ledger").innerText.includes("allow-once by ui:operator") && document.querySelector("#ledger").innerText.includes(%s)`, js("policy")))
	b.do("ledger filter", chromedp.SendKeys("#ledger-approval", slug+"\r"))
	b.wait("filtered", `[...document.querySelectorAll("#ledger tbody tr")].every(r => !r.innerText.includes("exec-approvals.json"))`)
	b.do("verify", chromedp.Click("#ledger-verify-btn"))
	b.wait("chain intact", `document.querySelector("#ledger-verify").innerText.includes("Chain intact")`)
	b.shot("07c-ledger")

	// Doctor: the findings of this home.
	b.do("doctor page", chromedp.Click(`nav a[data-nav="doctor"]`))
	b.wait("findings", `!!document.querySelector("#doctor .finding, #doctor .empty")`)
	b.shot("07d-doctor")

	// Phone width: no horizontal scrolling on any page.
	b.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
	r2 := agent.Exec(map[string]any{"command": "echo phone-width-check-950 && sleep 950.2", "background": true})
	for _, p := range []struct{ name, path, ready string }{
		{"overview", "/", `document.querySelector("#overview-sessions").innerText.includes("kept")`},
		{"approvals", "/approvals", `!!document.querySelector(".approval")`},
		{"sessions", "/sessions", `!!document.querySelector("#sessions tbody tr[data-id]")`},
		{"session", "/sessions/" + sid + "?agent=main", `!!document.querySelector("#output") && document.querySelector("#output").textContent.includes("after-input-950")`},
		{"policy", "/policy", `document.querySelector("#policy-text").value.length > 0`},
		{"nodes", "/nodes", `document.querySelector("#nodes-body").innerText.includes("Pending pairing (0)")`},
		{"agents", "/agents", `!!document.querySelector('#agents tr[data-agent="ci-950"]')`},
		{"ledger", "/ledger", `document.querySelectorAll("#ledger tbody tr").length > 3`},
		{"doctor", "/doctor", `!!document.querySelector("#doctor .finding, #doctor .empty")`},
	} {
		b.do("phone "+p.name, chromedp.Navigate(g.Base+p.path))
		b.wait("phone "+p.name+" ready", p.ready)
		// Nothing may stick out to the right, except inside the boxes that
		// scroll sideways on purpose (wide tables, terminal output).
		if over := b.eval(overflowJS); over != "" {
			t.Errorf("phone %s: wider than the screen: %s", p.name, over)
		}
		b.shot("08-phone-" + p.name)
	}
	// Deny from the phone by tapping.
	b.do("phone approvals", chromedp.Navigate(g.Base+"/approvals"))
	b.wait("phone card", `!!document.querySelector(".approval")`)
	b.do("deny", chromedp.Click(`.approval [data-decision="deny"]`))
	b.wait("denied", `!document.querySelector(".approval")`)
	e2etest.Eventually(t, 10*time.Second, func() string {
		if code, m := g.Do("GET", "/v1/sessions/"+r2.Str("sessionId"), g.Token, nil, nil); code != 200 || m["state"] != "denied" {
			return fmt.Sprintf("denied approval: %d %v", code, m)
		}
		return ""
	})

	// Sign out: the cookie is dead afterwards, and nothing calls the API
	// once the operator has clicked "Sign out" — here a navigation in the
	// same instant, standing for every timer, debounced refresh and event
	// handler of the page (before, such a call raced the sign-out and was
	// refused with 401).
	b.eval(`(() => { window.__after = []; window.__out = false; const f = window.fetch;
	  window.fetch = (u, o) => { if (window.__out && !String(u).startsWith("/v1/ui/")) window.__after.push(String(u)); return f(u, o); };
	  return ""; })()`)
	b.eval(`(() => { window.__out = true; document.getElementById("logout").click();
	  document.querySelector('nav a[data-nav="sessions"]').click(); return ""; })()`)
	b.wait("login form", `!!document.querySelector("#token") && document.querySelector("#top").hidden`)
	if after := b.eval(`window.__after.join(" ")`); after != "" {
		t.Errorf("API calls after sign-out: %s", after)
	}
	b.do("reload", chromedp.Navigate(g.Base+"/sessions"))
	b.wait("still signed out", `!!document.querySelector("#token")`)
	b.shot("09-signed-out")
	b.checkConsole("/v1/nodes 503", "/v1/approvals-file 409", "/v1/ui/session 401")
}

// TestUIPTYTerminal signs in with the operator token, refuses an agent
// token, and drives a PTY session in the xterm.js widget: a prompt without
// a newline shows at once, keys typed into the terminal reach the
// program.
func TestUIPTYTerminal(t *testing.T) {
	home := e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`)
	g := e2etest.StartGateway(t, home)
	b := newBrowser(t, 1100, 800)

	b.do("login page", chromedp.Navigate(g.Base+"/login"))
	b.wait("token form", `!!document.querySelector("#token")`)
	b.do("agent token", chromedp.SendKeys("#token", g.Token+"\r"))
	b.wait("agent token refused", `document.querySelector("#login-error").textContent.includes("agent tokens cannot open the control UI")`)
	b.do("operator token", setText("#token", ""), chromedp.SendKeys("#token", g.Operator+"\r"))
	b.wait("signed in", `location.pathname === "/" && !document.querySelector("#top").hidden`)

	agent := g.MCPClient(g.Token)
	r := agent.Exec(map[string]any{"command": `printf 'pty-950> '; head -n 1; echo got-it-950; sleep 950.3`, "pty": true, "background": true})
	sid := r.Str("sessionId")
	if sid == "" {
		t.Fatalf("exec: %s %v", r.Text, r.D)
	}
	b.do("session page", chromedp.Navigate(g.Base+"/sessions/"+sid+"?agent=main"))
	b.wait("prompt in terminal", `document.querySelector("#terminal .xterm-rows").textContent.includes("pty-950>")`)
	// Text goes in as the browser's text input (as typing or an IME does;
	// synthetic key events would deliver each character twice), then a
	// real Enter key press.
	b.do("type into terminal", chromedp.Click("#terminal"), chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: "typed-in-xterm"})
		return err
	}), chromedp.KeyEvent("\r"))
	b.wait("program answered", `document.querySelector("#terminal .xterm-rows").textContent.includes("got-it-950")`)
	rows := b.eval(`document.querySelector("#terminal .xterm-rows").textContent`)
	if strings.Count(rows, "typed-in-xterm") != 2 { // the tty's echo, then head's copy
		t.Errorf("terminal lacks the echoed input: %q", rows)
	}
	b.shot("01-pty-terminal")
	b.do("kill", chromedp.Click("#kill"))
	b.wait("killed", `document.querySelector("#state-badge").innerText.includes("killed")`)
	// A finished PTY session replays from its recording: the terminal is
	// cleared (a marker put into every row goes) and the output drawn again.
	b.wait("replay offered", `!!document.querySelector("#replay") && !document.querySelector("#replay").hidden`)
	b.eval(`(() => { for (const d of document.querySelectorAll("#terminal .xterm-rows > div")) d.append("STALE-950"); return "" })()`)
	b.do("replay", chromedp.Click("#replay"))
	b.wait("replayed", `document.querySelector("#replay").textContent === "Replay" && (() => { const t = document.querySelector("#terminal .xterm-rows").textContent; return t.includes("pty-950>") && t.includes("got-it-950") && !t.includes("STALE-950"); })()`)
	b.shot("02-pty-replayed")
	e2etest.Eventually(t, 5*time.Second, func() string {
		if p := e2etest.Pgrep(`^sleep 950\.3`); len(p) != 0 {
			return fmt.Sprintf("sleep 950.3 still running: %v", p)
		}
		return ""
	})
	b.checkConsole("/v1/ui/session 401", "/v1/ui/session 403", "/v1/nodes 503")
}

// TestServeStreamBytes covers what the UI's terminal reads: bytes=true
// streams the output as produced (partial lines, escapes and CR kept, no
// split UTF-8 sequence), and operators name the session's agent in the
// query because an EventSource cannot send X-Conch-Agent.
func TestServeStreamBytes(t *testing.T) {
	g := e2etest.StartGateway(t, e2etest.NewHome(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`))
	_, m := g.Do("POST", "/v1/exec", g.Token, map[string]any{"command": `printf 'partial-951 \033[1m\342\202'; sleep 1; printf '\254 done\r\n'; sleep 951.1`, "background": true}, nil)
	id, _ := m["details"].(map[string]any)["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v", m)
	}
	t.Cleanup(func() { g.Do("POST", "/v1/sessions/"+id+"/kill", g.Token, map[string]any{}, nil) })
	var texts []string
	e2etest.ReadSSE(t, g.Base+"/v1/sessions/"+id+"/stream?bytes=true&agent=main", g.Operator, nil, func(e e2etest.SSEEvent) bool {
		if e.Event != "output" {
			return false
		}
		var d struct{ Text string }
		json.Unmarshal([]byte(e.Data), &d)
		texts = append(texts, d.Text)
		return strings.Contains(strings.Join(texts, ""), "done")
	}, 10*time.Second)
	if texts[0] != "partial-951 \x1b[1m" {
		t.Errorf("first chunk %q: want the partial line without the incomplete rune", texts[0])
	}
	if all := strings.Join(texts, ""); all != "partial-951 \x1b[1m€ done\r\n" {
		t.Errorf("bytes %q", all)
	}
	// The agent query is for operators: an operator naming another agent
	// finds nothing, an agent's own query is ignored.
	if code, _ := g.Do("GET", "/v1/sessions/"+id+"/stream?bytes=true&agent=nobody", g.Operator, nil, nil); code != 404 {
		t.Errorf("operator, other agent: %d", code)
	}
	got := e2etest.ReadSSE(t, g.Base+"/v1/sessions/"+id+"/stream?bytes=true&agent=nobody", g.Token, nil, func(e e2etest.SSEEvent) bool { return e.Event == "output" }, 10*time.Second)
	if len(got) == 0 {
		t.Error("agent stream with agent query")
	}
	if code, m := g.Do("GET", "/v1/sessions/"+id+"/stream?bytes=true&stream=stdout", g.Token, nil, nil); code != 400 {
		t.Errorf("bytes with one stream: %d %v", code, m)
	}
}

// TestUINodesPage drives the Nodes page against answers in the shape of
// the /v1/nodes routes (docs/gateway.md, docs/nodes.md), with nodes in every state, without
// running nodes: the browser's requests to /v1/nodes… are answered by the
// test through the DevTools protocol; the per-agent binding goes to the
// real gateway. (The real node hub is covered by e2e/nodes.)
func TestUINodesPage(t *testing.T) {
	home := e2etest.NewHome(t, "")
	g := e2etest.StartGateway(t, home)
	b := newBrowser(t, 1100, 800)

	var mu sync.Mutex
	var calls []string
	paused := chromedp.Events(b.ctx, fetch.RequestPaused)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			u, _ := url.Parse(ev.Request.URL)
			mu.Lock()
			calls = append(calls, ev.Request.Method+" "+u.Path)
			mu.Unlock()
			body := `{}`
			if ev.Request.Method == "GET" && u.Path == "/v1/nodes" {
				body = `{"paired":[{"nodeId":"a1b2c3d4e5f6a1b2c3d4e5f6","name":"build-1","platform":"linux","arch":"amd64","remoteIp":"10.0.0.7","connected":true,"lastSeenAtMs":1764480000000},
				                   {"nodeId":"0f0e0d0c0b0a090807060504","name":"laptop","platform":"darwin","connected":false}],
				         "pending":[{"nodeId":"99887766554433221100aabb","name":"new-box","platform":"linux","remoteIp":"10.0.0.9","requestedAtMs":1764480000000}]}`
			}
			chromedp.Call(b.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: 200,
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(body)})
		}
	}()
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/v1/nodes*"}}}); err != nil {
		t.Fatal(err)
	}
	b.do("login", chromedp.Navigate(loginLink(t, home)))
	b.wait("signed in", `location.pathname === "/" && !!document.querySelector("#overview-nodes p")`)
	if s := b.eval(`document.querySelector("#overview-nodes").innerText`); s != "1 connected, 1 offline, 1 pending" {
		t.Errorf("overview nodes: %q", s)
	}
	b.do("nodes page", chromedp.Click(`nav a[data-nav="nodes"]`))
	b.wait("tables", `document.querySelector("#nodes-body").innerText.includes("Connected (1)") && document.querySelector("#nodes-body").innerText.includes("Offline (1)") && document.querySelector("#nodes-body").innerText.includes("Pending pairing (1)")`)
	b.shot("01-nodes")
	// Bind agent main to build-1 through the real exec-defaults route.
	b.wait("binding options", `[...document.querySelectorAll("#bindings option")].some(o => o.value === "a1b2c3d4e5f6a1b2c3d4e5f6")`)
	b.do("bind", chromedp.SetValue(`#bindings select`, "a1b2c3d4e5f6a1b2c3d4e5f6"), chromedp.Click(`#bindings button`))
	e2etest.Eventually(t, 5*time.Second, func() string {
		if _, m := g.Do("GET", "/v1/agents/main/exec-defaults", g.Operator, nil, nil); m["node"] != "a1b2c3d4e5f6a1b2c3d4e5f6" {
			return fmt.Sprintf("binding: %v", m)
		}
		return ""
	})
	// Each action reloads the tables: wait for fresh ones before the next.
	stale := func() {
		b.eval(`(document.querySelectorAll("#nodes-body table").forEach(t => t.dataset.stale = "1"), "")`)
	}
	fresh := `document.querySelectorAll("#nodes-body table").length === 3 && !document.querySelector("#nodes-body table[data-stale]")`
	stale()
	b.do("approve pairing", chromedp.Click(`#nodes-body button.ok`))
	b.wait("reloaded after approve", fresh)
	b.do("remove node", chromedp.Click(`#nodes-body table button.bad`))
	b.wait("asks again", `document.querySelector("#nodes-body table button.bad").textContent === "Really remove?"`)
	stale()
	b.do("confirm remove", chromedp.Click(`#nodes-body table button.bad`))
	b.wait("reloaded after remove", fresh)
	b.do("invite", chromedp.Click("#invite"))
	e2etest.Eventually(t, 5*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		all := strings.Join(calls, "\n")
		for _, want := range []string{"POST /v1/nodes/99887766554433221100aabb/approve", "DELETE /v1/nodes/a1b2c3d4e5f6a1b2c3d4e5f6", "POST /v1/nodes/invites"} {
			if !strings.Contains(all, want) {
				return fmt.Sprintf("no %q among the node requests:\n%s", want, all)
			}
		}
		return ""
	})
	b.checkConsole()
}
