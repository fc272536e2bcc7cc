package ui

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/conchsh/conch/internal/testkit/e2etest"
)

// hiddenShownJS names the elements that carry the hidden attribute and
// are still displayed (a stylesheet rule that sets display overrides the
// attribute unless the page forbids it).
const hiddenShownJS = `[...document.querySelectorAll("[hidden]")].filter(e => getComputedStyle(e).display !== "none").map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "")).join(", ")`

// signedOutJS is true on the sign-in page with no navigation and no
// "Sign out" on screen.
const signedOutJS = `!!document.querySelector("#token") && getComputedStyle(document.getElementById("top")).display === "none" &&
  [...document.querySelectorAll("nav a, #logout")].every(e => e.getClientRects().length === 0)`

// TestUILoginLinkInOpenTab: the signed-out page shows neither the
// navigation nor "Sign out", and a login link pasted into a tab already
// at /login (only the fragment changes, so the page does not load again)
// signs in; again after signing out. "Signed out." is a note, a used
// link an error.
func TestUILoginLinkInOpenTab(t *testing.T) {
	home := e2etest.NewHome(t, "")
	g := e2etest.StartGateway(t, home)
	b := newBrowser(t, 1280, 800)

	b.do("open /login", chromedp.Navigate(g.Base+"/login"))
	b.wait("sign-in page", `!!document.querySelector("#token")`)
	b.wait("signed-out page without navigation", signedOutJS)
	if s := b.eval(hiddenShownJS); s != "" {
		t.Errorf("hidden elements displayed on the signed-out page: %s", s)
	}
	b.shot("00-signed-out")
	for i := range 2 {
		link := loginLink(t, home)
		// What pasting into the address bar does: a same-document
		// navigation to /login#code=….
		b.do(fmt.Sprintf("paste link %d", i), chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.href = %s", js(link))))
		b.wait("signed in", `location.pathname === "/" && getComputedStyle(document.getElementById("top")).display !== "none" && !!document.querySelector("#overview-approvals")`)
		if h := b.eval(`location.hash`); h != "" {
			t.Fatalf("login code left in the URL: %q", h)
		}
		if s := b.eval(hiddenShownJS); s != "" {
			t.Errorf("hidden elements displayed: %s", s)
		}
		b.shot(fmt.Sprintf("%02d-signed-in", 2*i+1))
		b.do("sign out", chromedp.Click("#logout"))
		b.wait("signed out again", signedOutJS+` && location.pathname === "/login"`)
		// "Signed out." is a note, not an error.
		b.wait("signed-out note", `document.querySelector("#login-error").textContent === "Signed out." && !document.querySelector("#login-error").classList.contains("error")`)
		b.shot(fmt.Sprintf("%02d-signed-out", 2*i+2))
		if i == 1 {
			// The link just used, pasted again: refused, as an error.
			b.do("paste a used link", chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.href = %s", js(link))))
			b.wait("used link refused", `document.querySelector("#login-error").textContent.includes("already used") && document.querySelector("#login-error").classList.contains("error")`+" && "+signedOutJS)
			b.shot("05-used-link")
		}
	}
	b.checkConsole("/v1/ui/session 401")
}
