// conch control UI: a small single-page app over the public /v1 API.
// It keeps the CSRF token of its cookie session in memory only and sends
// it in X-Conch-CSRF with every state-changing request.
"use strict";

(function () {
  const main = document.getElementById("main");
  const state = { csrf: "", events: null, page: null, pending: 0 };

  // ---------- what an agent wrote, shown ----------
  // Commands, directories, names, reasons and notices come from agents
  // and nodes. Every character a browser would draw as nothing or as
  // something else (controls, bidi overrides and isolates, zero-width and
  // other format characters, fillers, every space but U+0020) is shown as
  // an escape (\x1b, \u202e), the classes and the form of the CLI's
  // internal/term/visible, so what the operator reads is what runs. h() and
  // setText() are the one place text reaches the page; a pre or a .cmd
  // block keeps its tabs and newlines, everything else stays on its line.
  const HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Zs}\p{Bidi_Control}\p{Join_Control}\p{Default_Ignorable_Code_Point}\p{Variation_Selector}\p{Noncharacter_Code_Point}]/gu;
  const SHORT = { "\n": "\\n", "\t": "\\t", "\r": "\\r" };
  function visible(s, keepLines) {
    return String(s).replace(HIDDEN, c => {
      if (c === " " || keepLines && (c === "\n" || c === "\t")) return c;
      if (SHORT[c]) return SHORT[c];
      const cp = c.codePointAt(0);
      const hex = (n) => cp.toString(16).padStart(n, "0");
      return cp <= 0x7f ? "\\x" + hex(2) : cp <= 0xffff ? "\\u" + hex(4) : "\\U" + hex(8);
    });
  }
  function multiline(el) { return el.tagName === "PRE" || el.classList.contains("cmd"); }
  function setText(el, s) { el.textContent = visible(s, multiline(el)); }

  // ---------- helpers ----------
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "class") el.className = v;
      else if (k === "text") setText(el, v);
      else if (k === "title" || k === "aria-label" || k === "placeholder") el.setAttribute(k, visible(v, false));
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const kid of kids.flat()) {
      if (kid === undefined || kid === null || kid === false) continue;
      el.append(kid instanceof Node ? kid : visible(kid, multiline(el)));
    }
    return el;
  }
  function toast(msg) {
    const t = h("div", { text: msg });
    const box = document.getElementById("toast");
    box.append(t);
    while (box.children.length > 3) box.firstElementChild.remove();
    setTimeout(() => t.remove(), 4000);
  }
  // debounce runs fn once, ms after the last of a burst of calls (events
  // replayed from the gateway's ring arrive in bursts).
  function debounce(fn, ms) {
    let t = null;
    const d = (...a) => { clearTimeout(t); t = setTimeout(() => { t = null; fn(...a); }, ms); };
    d.cancel = () => clearTimeout(t);
    return d;
  }
  // patchRows makes tbody show the rows in fresh, keeping the rows and
  // cells that did not change, so that focus and a pointer stay put while
  // a table refreshes.
  function patchRows(tbody, fresh) {
    const old = new Map([...tbody.children].filter(r => r.dataset.id).map(r => [r.dataset.id, r]));
    const rows = fresh.map(n => {
      const o = n.dataset.id && old.get(n.dataset.id);
      if (!o || o.cells.length !== n.cells.length) return n;
      [...n.cells].forEach((c, i) => { if (o.cells[i].outerHTML !== c.outerHTML) o.cells[i].replaceWith(c); });
      return o;
    });
    rows.forEach((r, i) => { if (tbody.children[i] !== r) tbody.insertBefore(r, tbody.children[i] || null); });
    while (tbody.children.length > rows.length) tbody.lastElementChild.remove();
  }
  function fmtTime(ms) {
    if (!ms) return "—";
    const d = new Date(ms);
    return d.toLocaleString();
  }
  function fmtDur(ms) {
    if (ms === undefined || ms === null) return "—";
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  }

  class APIError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }

  // api calls the /v1 API with the session cookie. opts.agent sets
  // X-Conch-Agent (to address another agent's session); opts.text returns
  // a body that is not JSON as text.
  // opts.csrf gives the CSRF token for a call made while signing out.
  // Signed out (no CSRF token), only the /v1/ui/ sign-in routes are
  // called: a refresh that fires after sign-out never reaches the API.
  const inflight = new Set();
  async function api(method, path, body, opts) {
    const csrf = (opts && opts.csrf) || state.csrf;
    if (!csrf && !path.startsWith("/v1/ui/")) throw new APIError(401, "signed_out", "Signed out.");
    const headers = { "Accept": "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (method !== "GET" && method !== "HEAD") headers["X-Conch-CSRF"] = csrf;
    if (opts && opts.agent) headers["X-Conch-Agent"] = opts.agent;
    const ctl = new AbortController();
    const call = fetch(path, { method, headers, credentials: "same-origin", signal: ctl.signal,
      body: body === undefined ? undefined : JSON.stringify(body) });
    const entry = { ctl, done: call.catch(() => {}) };
    inflight.add(entry);
    let resp;
    try { resp = await call; } finally { inflight.delete(entry); }
    let data = null;
    const ct = resp.headers.get("Content-Type") || "";
    if (ct.includes("json")) data = await resp.json().catch(() => null);
    else { const text = await resp.text(); if (opts && opts.text && resp.ok) data = text; }
    if (!resp.ok) {
      const err = (data && data.error) || {};
      if (resp.status === 401 && !path.startsWith("/v1/ui/")) showLogin("Your session ended; sign in again.", true);
      throw new APIError(resp.status, err.code || "http_" + resp.status, err.message || resp.statusText);
    }
    return data;
  }

  // The output terminals' colours: the page's dark background and the
  // 16-colour palette of the rest of the UI.
  const TERM_THEME = { background: "#14161a", foreground: "#e6e6e6",
    black: "#000000", red: "#cd3131", green: "#0dbc79", yellow: "#e5e510", blue: "#2472c8", magenta: "#bc3fbc", cyan: "#11a8cd", white: "#e5e5e5",
    brightBlack: "#666666", brightRed: "#f14c4c", brightGreen: "#23d18b", brightYellow: "#f5f543", brightBlue: "#3b8eea", brightMagenta: "#d670d6",
    brightCyan: "#29b8db", brightWhite: "#ffffff" };

  // ---------- sign-in ----------
  // showLogin shows the sign-in form with msg under it: an error (a
  // refused token or code), or, with notice, a plain note ("Signed out.").
  function showLogin(msg, notice) {
    closePage();
    if (state.events) { state.events.close(); state.events = null; }
    document.getElementById("top").hidden = true;
    if (location.pathname !== "/login") history.replaceState(null, "", "/login");
    const err = h("p", notice ? { class: "muted", role: "status", id: "login-error" } : { class: "error", role: "alert", id: "login-error" }, msg || "");
    const tok = h("input", { type: "password", id: "token", autocomplete: "off", placeholder: "cop_…", "aria-label": "Operator token" });
    const form = h("form", { class: "card login", onsubmit: async (e) => {
      e.preventDefault();
      try { await signIn({ token: tok.value.trim() }); } catch (ex) {
        err.className = "error"; err.setAttribute("role", "alert"); setText(err, ex.message);
      }
    } },
    h("h1", {}, "Sign in to conch"),
    h("p", { class: "muted" }, "Run ", h("code", {}, "conch ui"), " on the gateway's machine for a one-time login link, or paste the operator token ($CONCH_HOME/operator.token). Agent tokens cannot sign in."),
    h("label", {}, "Operator token", tok),
    h("p", {}, h("button", { class: "primary", type: "submit" }, "Sign in")), err);
    main.replaceChildren(form);
    tok.focus();
  }
  async function signIn(body) {
    const r = await api("POST", "/v1/ui/session", body);
    state.csrf = r.csrf;
    history.replaceState(null, "", "/");
    start();
  }

  // takeLoginCode returns the code of a login link (/login#code=…) the
  // tab is at, or "", and takes it out of the URL and the history: it is
  // single use.
  function takeLoginCode() {
    if (location.pathname !== "/login") return "";
    const code = new URLSearchParams(location.hash.slice(1)).get("code") || "";
    history.replaceState(null, "", "/login");
    return code;
  }
  async function signInWithCode(code) {
    try { await signIn({ code }); } catch (ex) { showLogin(ex.message); }
  }
  // A login link pasted into a tab that is already at /login changes only
  // the fragment: the page does not load again, so sign in from here.
  window.addEventListener("hashchange", () => {
    const code = takeLoginCode();
    if (code) signInWithCode(code);
  });

  async function boot() {
    const code = takeLoginCode();
    if (code) { await signInWithCode(code); return; }
    try {
      const r = await api("GET", "/v1/ui/session");
      state.csrf = r.csrf;
    } catch (ex) {
      showLogin(location.pathname === "/login" ? "" : "Sign in to continue.", true);
      return;
    }
    if (location.pathname === "/login") history.replaceState(null, "", "/");
    start();
  }

  function start() {
    document.getElementById("top").hidden = false;
    connectEvents();
    refreshPendingCount();
    route();
  }

  // ---------- live events ----------
  const listeners = new Set();
  function connectEvents() {
    if (state.events) return;
    const es = new EventSource("/v1/events");
    state.events = es;
    const live = document.getElementById("live");
    es.onopen = () => { setText(live, "live"); live.classList.add("on"); };
    es.onerror = async () => {
      setText(live, "reconnecting"); live.classList.remove("on");
      if (es.readyState !== EventSource.CLOSED) return; // the browser retries by itself
      // The gateway refused the stream (a restart ended the UI session,
      // or it answered an error): check the session, then reconnect.
      es.close();
      if (state.events === es) state.events = null;
      try { await api("GET", "/v1/ui/session"); } catch (_) { return; }
      setTimeout(() => { if (!state.events && state.csrf) connectEvents(); }, 2000);
    };
    for (const type of ["approval.requested", "approval.resolved", "approval.expired", "session.started",
      "session.backgrounded", "session.output", "session.ended", "session.evicted", "exec.notice",
      "node.pairing.requested", "node.connected", "node.disconnected", "node.renamed", "node.removed", "policy.changed"]) {
      es.addEventListener(type, (e) => {
        let data = {};
        try { data = JSON.parse(e.data); } catch (_) { /* keep {} */ }
        if (type.startsWith("approval.")) pendingCountSoon();
        if (type === "exec.notice") { notices.push(Object.assign({ at: Date.now() }, data)); if (notices.length > 50) notices.shift(); }
        for (const fn of listeners) fn(type, data);
      });
    }
  }
  const notices = [];
  const pendingCountSoon = debounce(() => refreshPendingCount(), 200);
  async function refreshPendingCount() {
    try {
      const r = await api("GET", "/v1/approvals?state=pending");
      const n = (r.approvals || []).length;
      const b = document.getElementById("pending-count");
      setText(b, n); b.hidden = n === 0;
      document.title = n ? "(" + n + ") conch" : "conch";
    } catch (_) { /* shown elsewhere */ }
  }

  // ---------- router ----------
  function closePage() {
    if (state.page && state.page.close) state.page.close();
    state.page = null;
    listeners.clear();
  }
  function route() {
    closePage();
    const p = location.pathname;
    let name = p.split("/")[1] || "overview";
    for (const a of document.querySelectorAll("nav a")) {
      if (a.dataset.nav === name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
    main.replaceChildren();
    const m = p.match(/^\/sessions\/([^/]+)$/);
    if (m) state.page = sessionPage(decodeURIComponent(m[1]), new URLSearchParams(location.search).get("agent") || "");
    else if (name === "sessions") state.page = sessionsPage();
    else if (name === "nodes") state.page = nodesPage();
    else if (name === "policy") state.page = policyPage();
    else if (name === "overview") state.page = overviewPage();
    else if (name === "agents") state.page = agentsPage();
    else if (name === "ledger") state.page = ledgerPage();
    else if (name === "doctor") state.page = doctorPage();
    else state.page = approvalsPage();
  }
  function go(path) {
    history.pushState(null, "", path);
    route();
    main.focus();
  }
  document.addEventListener("click", (e) => {
    const a = e.target.closest("a");
    if (!a || a.target || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin || url.pathname.startsWith("/v1/") || url.pathname.startsWith("/assets/")) return;
    e.preventDefault();
    go(url.pathname + url.search);
  });
  window.addEventListener("popstate", () => { if (location.pathname !== "/login") route(); });
  // Free the long-lived connections when the page goes away (browsers
  // allow only a few per host over HTTP/1.1).
  window.addEventListener("pagehide", () => {
    closePage();
    if (state.events) { state.events.close(); state.events = null; }
  });
  // Signing out first stops every caller of the API (page timers, the
  // event stream, debounced refreshes) and lets the calls in flight end
  // (a second at most, then they are aborted), and only then ends the
  // session: no call reaches the gateway with a dead cookie.
  document.getElementById("logout").addEventListener("click", async () => {
    const csrf = state.csrf;
    state.csrf = "";
    closePage();
    if (state.events) { state.events.close(); state.events = null; }
    const pending = [...inflight];
    await Promise.race([Promise.all(pending.map(e => e.done)), new Promise(r => setTimeout(r, 1000))]);
    for (const e of pending) e.ctl.abort();
    try { await api("DELETE", "/v1/ui/session", undefined, { csrf }); } catch (_) { /* signed out anyway */ }
    showLogin("Signed out.", true);
  });
  // Page-level keyboard shortcuts go to the current page unless typing.
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable || t.closest(".xterm"))) return;
    if (state.page && state.page.key && state.page.key(e)) e.preventDefault();
  });

  // ---------- overview ----------
  function overviewPage() {
    const page = {};
    const appr = h("div", { id: "overview-approvals" }), runs = h("div", { id: "overview-sessions" });
    const nodesBox = h("div", { id: "overview-nodes" }), noteBox = h("div", { id: "overview-notices" });
    main.append(h("h1", {}, "Overview"),
      h("div", { class: "grid" },
        h("section", { class: "card" }, h("h3", {}, h("a", { href: "/approvals" }, "Pending approvals")), appr),
        h("section", { class: "card" }, h("h3", {}, h("a", { href: "/sessions" }, "Running sessions")), runs),
        h("section", { class: "card" }, h("h3", {}, h("a", { href: "/nodes" }, "Nodes")), nodesBox),
        h("section", { class: "card" }, h("h3", {}, "Latest notices"), noteBox)));
    async function load() {
      try {
        const a = ((await api("GET", "/v1/approvals?state=pending")).approvals || []).filter(x => x.state === "pending");
        appr.replaceChildren(a.length ? h("ul", { class: "plain" }, a.slice(0, 6).map(x => h("li", {},
          h("span", { class: "mono" }, x.slug), " ", h("code", {}, x.command.length > 80 ? x.command.slice(0, 80) + "…" : x.command), h("span", { class: "muted" }, " · " + x.agent))))
          : h("p", { class: "muted" }, "Nothing waiting."));
      } catch (ex) { appr.replaceChildren(h("p", { class: "error" }, ex.message)); }
      try {
        const all = ((await api("GET", "/v1/sessions?all=true")).details || {}).sessions || [];
        const r = all.filter(x => x.state === "running");
        runs.replaceChildren(r.length ? h("ul", { class: "plain" }, r.slice(0, 8).map(x => h("li", {},
          h("a", { href: "/sessions/" + encodeURIComponent(x.sessionId) + "?agent=" + encodeURIComponent(x.agent || "main"), class: "mono" }, x.sessionId), " ",
          h("code", {}, x.command.length > 60 ? x.command.slice(0, 60) + "…" : x.command), h("span", { class: "muted" }, " · " + (x.agent || "main") + " · " + fmtDur(x.runtimeMs)))))
          : h("p", { class: "muted" }, "None running (" + all.length + " kept)."));
      } catch (ex) { runs.replaceChildren(h("p", { class: "error" }, ex.message)); }
      try {
        const n = await api("GET", "/v1/nodes");
        const paired = n.paired || n.nodes || [];
        nodesBox.replaceChildren(h("p", {}, paired.filter(x => x.connected).length + " connected, " + paired.filter(x => !x.connected).length + " offline, " + (n.pending || []).length + " pending"));
      } catch (ex) { nodesBox.replaceChildren(h("p", { class: "muted" }, ex.status === 503 ? "Node hosts are not available on this gateway." : ex.message)); }
      drawNotices();
    }
    function drawNotices() {
      noteBox.replaceChildren(notices.length ? h("ul", { class: "plain" }, notices.slice(-8).reverse().map(n => h("li", {},
        h("span", { class: n.kind === "failed" || n.kind === "denied" ? "bad-text" : "" }, n.kind), " ", (n.text || "").split("\n")[0],
        n.sessionId ? [" ", h("a", { href: "/sessions/" + encodeURIComponent(n.sessionId) }, "open")] : null)))
        : h("p", { class: "muted" }, "No notices since this page opened."));
    }
    const loadSoon = debounce(load, 300);
    listeners.add((type) => { if (type !== "session.output") loadSoon(); });
    const timer = setInterval(load, 5000);
    page.close = () => { clearInterval(timer); loadSoon.cancel(); };
    load();
    return page;
  }

  // ---------- approvals ----------
  function approvalsPage() {
    const list = h("div", { id: "approval-list" });
    const hist = h("tbody");
    const page = { timers: [] };
    main.append(
      h("div", { class: "row" }, h("h1", {}, "Approvals"), h("span", { class: "spacer" }),
        h("span", { class: "muted hide-narrow" }, "Keys: ", h("kbd", {}, "j"), h("kbd", {}, "k"), " move, ",
          h("kbd", {}, "o"), " allow once, ", h("kbd", {}, "a"), " always, ", h("kbd", {}, "d"), " deny")),
      list,
      h("h2", {}, "Recent decisions"),
      h("div", { class: "scroll" }, h("table", { id: "history", class: "stack" },
        h("thead", {}, h("tr", {}, h("th", {}, "When"), h("th", {}, "Approval"), h("th", {}, "Command"),
          h("th", {}, "Agent"), h("th", {}, "Decision"), h("th", { class: "hide-narrow" }, "By"))), hist)));
    const cards = new Map();

    function segTable(segs) {
      if (!segs || !segs.length) return null;
      return h("div", { class: "scroll" }, h("table", { class: "segments" },
        h("thead", {}, h("tr", {}, h("th", {}, "Segment"), h("th", {}, "Executable"), h("th", {}, "Verdict"))),
        h("tbody", {}, segs.map(s => h("tr", {},
          h("td", { class: "mono cmdcell" }, s.text || ""),
          h("td", { class: "mono cmdcell" }, s.exe || s.path || s.resolved || "(unresolved)", s.sha256 ? h("div", { class: "muted" }, "sha256 " + s.sha256.slice(0, 12) + "…") : null),
          h("td", { class: "verdict-" + (s.verdict || "miss") }, s.verdict || "miss", s.rule ? h("div", { class: "muted" }, s.rule) : null))))));
    }
    function card(a) {
      const left = h("span", { class: "timeleft" });
      const tick = () => {
        const ms = a.expiresAtMs - Date.now();
        setText(left, ms > 0 ? fmtDur(ms) + " left" : "expiring…");
        left.classList.toggle("low", ms < 20000);
      };
      tick();
      const explain = h("pre", { class: "explain" }, "…");
      const btns = h("div", { class: "row" },
        h("button", { class: "ok", type: "button", "data-decision": "allow-once", onclick: () => decide(a, "allow-once") }, "Allow once", h("kbd", {}, "o")),
        h("button", { type: "button", "data-decision": "allow-always", onclick: () => decide(a, "allow-always") }, "Always allow", h("kbd", {}, "a")),
        h("button", { class: "bad", type: "button", "data-decision": "deny", onclick: () => decide(a, "deny") }, "Deny", h("kbd", {}, "d")));
      const el = h("section", { class: "card approval", tabindex: "0", "data-id": a.id, "aria-label": "Approval " + a.slug },
        h("div", { class: "row" }, h("h3", {}, "Approval ", h("span", { class: "mono" }, a.slug)), h("span", { class: "spacer" }), left),
        h("code", { class: "cmd" }, a.command),
        h("dl", { class: "kv" },
          h("dt", {}, "Agent"), h("dd", {}, a.agent),
          h("dt", {}, "Host"), h("dd", {}, a.host + (a.nodeId ? " · node " + a.nodeId : "")),
          h("dt", {}, "Directory"), h("dd", { class: "mono" }, a.cwd),
          h("dt", {}, "Why"), h("dd", {}, a.reason || ("ask=" + (a.ask || "?") + ", security=" + (a.security || "?"))),
          h("dt", {}, "Policy"), h("dd", {}, "security " + (a.security || "?") + " · ask " + (a.ask || "?") + " · on timeout " + (a.askFallback || "deny")),
          a.persist && a.persist.length ? [h("dt", {}, "Always would add"), h("dd", { class: "mono" }, a.persist.join(", "))] : null),
        segTable(a.segments),
        h("details", {}, h("summary", {}, "Policy explain"), explain),
        btns);
      page.timers.push(setInterval(tick, 1000));
      api("POST", "/v1/policy/explain", { agent: a.agent, host: a.host, node: a.nodeId || "", cwd: a.cwd, command: a.command })
        .then(x => { setText(explain, x.text || JSON.stringify(x, null, 2)); })
        .catch(ex => { setText(explain, "explain failed: " + ex.message); });
      return el;
    }
    function render(all) {
      const seen = new Set();
      for (const a of all) {
        seen.add(a.id);
        if (!cards.has(a.id)) { const c = card(a); cards.set(a.id, c); list.append(c); }
      }
      for (const [id, c] of cards) if (!seen.has(id)) { c.remove(); cards.delete(id); }
      if (!cards.size) {
        if (!list.querySelector(".empty")) list.replaceChildren(h("div", { class: "empty" }, "No approvals waiting. New requests appear here live."));
      } else {
        const e = list.querySelector(".empty"); if (e) e.remove();
      }
    }
    async function load() {
      try {
        const r = await api("GET", "/v1/approvals?state=pending");
        render((r.approvals || []).filter(a => a.state === "pending"));
      } catch (ex) { list.replaceChildren(h("p", { class: "error" }, ex.message)); }
    }
    async function decide(a, decision) {
      const c = cards.get(a.id);
      if (c) for (const b of c.querySelectorAll("button")) b.disabled = true;
      try {
        const r = await api("POST", "/v1/approvals/" + encodeURIComponent(a.id) + "/decision", { decision });
        toast(a.slug + ": " + r.decision);
        if (c) {
          const next = c.nextElementSibling || c.previousElementSibling;
          c.remove(); cards.delete(a.id);
          if (next && next.classList.contains("approval")) next.focus();
        }
        render([...cards.keys()].map(id => ({ id })));
        refreshPendingCount();
        loadHistory();
      } catch (ex) {
        toast(ex.message);
        if (c) for (const b of c.querySelectorAll("button")) b.disabled = false;
        load();
      }
    }
    async function loadHistory() {
      try {
        const r = await api("GET", "/v1/ledger?limit=300");
        const recs = r.records || [];
        const byApproval = {}, byRequest = {};
        for (const x of recs) {
          if (x.type === "request") byApproval[x.approvalId] = x;
          if (x.type === "evaluate") byRequest[x.requestId] = x;
        }
        const rows = recs.filter(x => x.type === "decision").reverse().slice(0, 50).map(x => {
          const req = byApproval[x.approvalId];
          const ev = req && byRequest[req.requestId];
          return h("tr", {},
            h("td", { "data-label": "When" }, fmtTime(Date.parse(x.ts))),
            h("td", { class: "mono", "data-label": "Approval" }, (req && req.slug) || (x.approvalId || "").slice(0, 8)),
            h("td", { class: "mono cmdcell", "data-label": "Command" }, ev ? ev.command : "—"),
            h("td", { "data-label": "Agent" }, x.agent || "—"),
            h("td", { class: x.decision === "deny" || x.decision === "timeout" ? "bad-text" : "ok-text", "data-label": "Decision" }, x.decision + (x.fallback ? " (" + x.fallback + ")" : "")),
            h("td", { "data-label": "By" }, x.decidedBy || "—"));
        });
        hist.replaceChildren(...(rows.length ? rows : [h("tr", {}, h("td", { colspan: "6", class: "muted" }, "No decisions in the ledger yet."))]));
      } catch (ex) {
        hist.replaceChildren(h("tr", {}, h("td", { colspan: "6", class: "error" }, ex.message)));
      }
    }
    const loadSoon = debounce(load, 150), historySoon = debounce(loadHistory, 300);
    listeners.add((type) => {
      if (type.startsWith("approval.")) { loadSoon(); if (type !== "approval.requested") historySoon(); }
    });
    load();
    loadHistory();
    page.close = () => { page.timers.forEach(clearInterval); loadSoon.cancel(); historySoon.cancel(); };
    page.key = (e) => {
      const all = [...list.querySelectorAll(".approval")];
      if (!all.length) return false;
      let cur = document.activeElement && document.activeElement.closest(".approval");
      if (e.key === "j" || e.key === "k") {
        let i = all.indexOf(cur);
        i = e.key === "j" ? Math.min(all.length - 1, i + 1) : Math.max(0, i - 1);
        all[i].focus();
        return true;
      }
      const d = { o: "allow-once", a: "allow-always", d: "deny" }[e.key];
      if (!d) return false;
      cur = cur || all[0];
      const b = cur.querySelector('[data-decision="' + d + '"]');
      if (b && !b.disabled) b.click();
      return true;
    };
    return page;
  }

  // ---------- sessions ----------
  function stateBadge(s) {
    return h("span", { class: "state " + (s.state || s.status) }, s.state || s.status);
  }
  function endText(s) {
    if (s.state === "running" || s.status === "running") return s.awaitingInput ? "awaiting input" : "—";
    const parts = [];
    if (s.exitCode !== undefined && s.exitCode !== null) parts.push("exit " + s.exitCode);
    if (s.signal || s.exitSignal) parts.push(s.signal || s.exitSignal);
    if (s.killedBy) parts.push("killed by " + s.killedBy);
    if (s.reason) parts.push(s.reason);
    return parts.join(", ") || "—";
  }
  function sessionsPage() {
    const filter = h("input", { type: "search", id: "session-filter", placeholder: "Filter: id, agent, command, state  ( / )", "aria-label": "Filter sessions" });
    const body = h("tbody");
    const page = {};
    let rows = [];
    main.append(h("div", { class: "row" }, h("h1", {}, "Sessions"), h("span", { class: "spacer" }), filter),
      h("div", { class: "scroll" }, h("table", { id: "sessions", class: "stack" },
        h("thead", {}, h("tr", {}, h("th", {}, "Session"), h("th", {}, "Agent"), h("th", {}, "Command"), h("th", {}, "State"),
          h("th", {}, "End"), h("th", {}, "Runtime"), h("th", { class: "hide-narrow" }, "Host"), h("th", { class: "hide-narrow" }, "Started"))), body)));
    function draw() {
      const q = filter.value.trim().toLowerCase();
      const list = rows.filter(s => !q || [s.sessionId, s.agent, s.command, s.state, s.status, s.name, s.host].join(" ").toLowerCase().includes(q));
      const fresh = (list.length ? list.map(s => h("tr", { "data-id": s.sessionId },
        h("td", { class: "mono", "data-label": "Session" }, h("a", { href: "/sessions/" + encodeURIComponent(s.sessionId) + "?agent=" + encodeURIComponent(s.agent || "main") }, s.sessionId)),
        h("td", { "data-label": "Agent" }, s.agent || "main"),
        h("td", { class: "mono cmdcell", "data-label": "Command" }, h("span", {}, s.command, s.pty ? h("span", { class: "muted" }, " (pty)") : null)),
        h("td", { "data-label": "State" }, stateBadge(s)),
        h("td", { "data-label": "End" }, endText(s)),
        h("td", { "data-label": "Runtime" }, fmtDur(s.durationMs !== undefined ? s.durationMs : s.runtimeMs)),
        h("td", { class: "hide-narrow" }, s.host),
        h("td", { class: "hide-narrow" }, fmtTime(s.startedAt)))) : [h("tr", {}, h("td", { colspan: "8", class: "muted" }, rows.length ? "No session matches the filter." : "No sessions yet."))]);
      patchRows(body, fresh);
    }
    async function load() {
      try {
        const r = await api("GET", "/v1/sessions?all=true");
        rows = ((r.details && r.details.sessions) || []).sort((a, b) => b.startedAt - a.startedAt);
        draw();
      } catch (ex) { body.replaceChildren(h("tr", {}, h("td", { colspan: "8", class: "error" }, ex.message))); }
    }
    filter.addEventListener("input", draw);
    let pendingLoad = null;
    listeners.add((type) => {
      if (type.startsWith("session.") && type !== "session.output" && !pendingLoad) pendingLoad = setTimeout(() => { pendingLoad = null; load(); }, 250);
    });
    const timer = setInterval(load, 5000);
    page.close = () => { clearInterval(timer); if (pendingLoad) clearTimeout(pendingLoad); };
    page.key = (e) => { if (e.key === "/") { filter.focus(); return true; } return false; };
    load();
    return page;
  }

  function sessionPage(id, agent) {
    const page = {};
    const opts = { agent };
    const base = "/v1/sessions/" + encodeURIComponent(id);
    const info = h("dl", { class: "kv" });
    const title = h("div", { class: "row" }, h("a", { href: "/sessions" }, "← Sessions"));
    const out = h("div", { id: "output-wrap" });
    const endNote = h("p", { id: "end-state", class: "muted", role: "status" });
    const killBtn = h("button", { class: "bad", type: "button", id: "kill", onclick: kill }, "Kill");
    const rmBtn = h("button", { type: "button", id: "remove", onclick: remove }, "Remove");
    const replayBtn = h("button", { type: "button", id: "replay", hidden: true, title: "play the recorded output again, with its timing", onclick: () => replay() }, "Replay");
    const searchIn = h("input", { type: "search", id: "search", placeholder: "Search output (regex)", "aria-label": "Search output" });
    const results = h("div", { class: "results", id: "search-results" });
    const inputIn = h("input", { type: "text", id: "input", placeholder: "Text to send", "aria-label": "Input text", autocomplete: "off" });
    const keySel = h("select", { id: "key", "aria-label": "Key to send" }, ["Enter", "C-c", "C-d", "Tab", "Escape", "Up", "Down", "Left", "Right", "C-z", "BSpace"].map(k => h("option", { value: k }, k)));
    let entry = null, es = null, term = null, fit = null;

    main.append(title,
      h("div", { class: "card" }, h("div", { class: "row" }, h("h1", { class: "mono", style: null }, id), h("span", { id: "state-badge" }), h("span", { class: "spacer" }), replayBtn, killBtn, rmBtn), info),
      out, endNote,
      h("div", { class: "card" },
        h("form", { class: "row", id: "input-form", onsubmit: (e) => { e.preventDefault(); send(inputIn.value, true); } },
          inputIn,
          h("button", { type: "submit", class: "primary" }, "Send + Enter"),
          h("button", { type: "button", onclick: () => send(inputIn.value, false) }, "Send"),
          h("button", { type: "button", title: "bracketed paste when the program asks for it", onclick: async () => {
            if (inputIn.value && await post("/paste", { text: inputIn.value })) inputIn.value = "";
          } }, "Paste"),
          keySel, h("button", { type: "button", onclick: () => sendKey(keySel.value) }, "Send key"),
          h("button", { type: "button", onclick: () => post("/input", { data: "", eof: true }, "EOF sent") }, "EOF")),
        h("form", { class: "row", style: null, onsubmit: (e) => { e.preventDefault(); search(); } },
          searchIn, h("label", { class: "row" }, h("input", { type: "checkbox", id: "search-i" }), "ignore case"),
          h("button", { type: "submit" }, "Search")),
        results));
    // title h1 style
    main.querySelector("h1").style.margin = "0";

    function showInfo() {
      const s = entry;
      document.getElementById("state-badge").replaceChildren(stateBadge(s));
      info.replaceChildren(...[
        h("dt", {}, "Command"), h("dd", {}, h("code", { class: "cmd" }, s.command)),
        h("dt", {}, "Agent"), h("dd", {}, s.agent || agent),
        h("dt", {}, "Host"), h("dd", {}, s.host + (s.pty ? " · pty" : "")),
        h("dt", {}, "Directory"), h("dd", { class: "mono" }, s.cwd),
        h("dt", {}, "Started"), h("dd", {}, fmtTime(s.startedAt)),
        h("dt", {}, "Runtime"), h("dd", {}, fmtDur(s.durationMs !== undefined ? s.durationMs : s.runtimeMs)),
        h("dt", {}, "End"), h("dd", { id: "end-text" }, endText(s)),
        s.approvalId ? [h("dt", {}, "Approval"), h("dd", { class: "mono" }, s.approvalId)] : null,
        s.pid ? [h("dt", {}, "PID"), h("dd", {}, s.pid)] : null,
        h("dt", {}, "Audit"), h("dd", {}, h("a", { href: "/ledger?session=" + encodeURIComponent(id), id: "ledger-link" }, "ledger records"))].flat().filter(Boolean));
      const running = s.state === "running";
      killBtn.disabled = !running;
      rmBtn.disabled = running;
      replayBtn.hidden = !(s.pty && !running);
      // Input only reaches a running session.
      for (const el of document.querySelectorAll("#input-form input, #input-form button, #input-form select")) el.disabled = !running;
    }
    async function refresh() {
      try {
        if (!opts.agent) {
          // A link without the agent (a notice): find the session's owner.
          const all = ((await api("GET", "/v1/sessions?all=true")).details || {}).sessions || [];
          const hit = all.find(x => x.sessionId === id);
          opts.agent = agent = (hit && hit.agent) || "main";
        }
        entry = await api("GET", base, undefined, opts);
        showInfo();
        return true;
      } catch (ex) {
        info.replaceChildren(h("dd", { class: "error" }, ex.message));
        killBtn.disabled = rmBtn.disabled = true;
        return false;
      }
    }
    function startStream() {
      // Every session's output is drawn by xterm.js, from the output bytes
      // exactly as produced (colours, carriage returns, cursor movement).
      // A PTY session's terminal also takes keyboard input; a pipe
      // session's is read-only, and its bare LFs start a new line.
      const pty = !!entry.pty;
      const box = pty ? h("div", { class: "term", id: "terminal" })
        : h("div", { class: "term", id: "output", role: "log", "aria-label": "Session output" });
      out.replaceChildren(box);
      term = new window.Terminal({ convertEol: !pty, disableStdin: !pty, fontSize: 13, scrollback: 10000, cursorBlink: false,
        cursorInactiveStyle: pty ? "outline" : "none", theme: TERM_THEME });
      if (window.FitAddon) { fit = new window.FitAddon.FitAddon(); term.loadAddon(fit); }
      // The terminal takes Tab and Escape for the program; F6 moves the
      // focus out of it so that keyboard users are never trapped.
      term.attachCustomKeyEventHandler((e) => {
        if (e.key === "F6" && e.type === "keydown") { killBtn.disabled ? inputIn.focus() : killBtn.focus(); return false; }
        return pty;
      });
      term.open(box);
      if (fit) fit.fit();
      if (pty) {
        let chain = Promise.resolve();
        term.onData((d) => {
          if (entry && entry.state !== "running") return;
          chain = chain.then(() => api("POST", base + "/input", { data: d }, opts).catch(ex => toast(ex.message)));
        });
      }
      page.onResize = () => { if (fit) fit.fit(); };
      window.addEventListener("resize", page.onResize);
      const q = new URLSearchParams({ agent: entry.agent || agent, bytes: "true" });
      es = new EventSource(base + "/stream?" + q.toString());
      es.addEventListener("output", (e) => { term.write(JSON.parse(e.data).text); });
      es.addEventListener("end", async (e) => {
        es.close(); es = null;
        const d = JSON.parse(e.data);
        setText(endNote, "Session ended: " + d.state + (d.exitCode !== null && d.exitCode !== undefined ? ", exit " + d.exitCode : "") +
          (d.signal ? ", " + d.signal : "") + (d.killedBy ? ", killed by " + d.killedBy : "") + ".");
        await refresh();
      });
      es.onerror = () => { if (es && es.readyState === EventSource.CLOSED) { es = null; refresh(); } };
    }
    // replay plays a finished PTY session's recording (asciicast v2, with
    // the journal's timing; pauses longer than a second are cut to one)
    // in the terminal. A second click stops it and shows the end at once.
    let playing = null;
    async function replay() {
      if (playing) { playing.stop(); return; }
      let cast;
      try { cast = await api("GET", base + "/recording", undefined, Object.assign({ text: true }, opts)); } catch (ex) { toast(ex.message); return; }
      const lines = cast.split("\n").filter(Boolean);
      let hdr = {};
      try { hdr = JSON.parse(lines[0]); } catch (_) { toast("The recording cannot be read."); return; }
      const events = [];
      for (const l of lines.slice(1)) {
        try { const e = JSON.parse(l); if (e[1] === "o") events.push(e); } catch (_) { /* skip */ }
      }
      term.reset();
      if (hdr.width && hdr.height) term.resize(hdr.width, hdr.height);
      let i = 0, timer = null, at = 0;
      const done = () => { clearTimeout(timer); playing = null; setText(replayBtn, "Replay"); };
      const step = () => {
        while (i < events.length && events[i][0] <= at + 1e-3) term.write(events[i++][2]);
        if (i >= events.length) { done(); return; }
        const wait = Math.min(events[i][0] - at, 1);
        at = events[i][0];
        timer = setTimeout(step, wait * 1000);
      };
      playing = { stop: () => { while (i < events.length) term.write(events[i++][2]); done(); }, cancel: done };
      setText(replayBtn, "Stop replay");
      step();
    }
    async function post(suffix, body, okMsg) {
      try {
        const r = await api("POST", base + suffix, body, opts);
        toast(okMsg || (r && r.text) || "done");
        return r;
      } catch (ex) { toast(ex.message); return null; }
    }
    async function send(text, enter) {
      if (!text && !enter) return;
      const nl = entry && entry.pty ? "\r" : "\n";
      const r = await post("/input", { data: text + (enter ? nl : "") });
      if (r) inputIn.value = "";
    }
    function sendKey(k) { return post("/input", { keys: [k] }); }
    async function kill() {
      killBtn.disabled = true;
      await post("/kill", {});
      await refresh();
    }
    async function remove() {
      try {
        const r = await api("DELETE", base, undefined, opts);
        toast((r && r.text) || "removed");
        go("/sessions");
      } catch (ex) { toast(ex.message); }
    }
    async function search() {
      const q = new URLSearchParams({ pattern: searchIn.value, ignoreCase: document.getElementById("search-i").checked ? "true" : "false", context: "1" });
      if (!searchIn.value) return;
      try {
        const r = await api("GET", base + "/search?" + q.toString(), undefined, opts);
        const m = (r.details && r.details.matches) || [];
        results.replaceChildren(...(m.length ? m.map(x => h("div", { class: "mono" }, (x.line !== undefined ? x.line + ": " : ""), highlight(x.text || "", searchIn.value, document.getElementById("search-i").checked)))
          : [h("div", { class: "muted" }, r.text || "No matches.")]));
      } catch (ex) { results.replaceChildren(h("div", { class: "error" }, ex.message)); }
    }
    function highlight(text, pattern, ic) {
      let re;
      try { re = new RegExp(pattern, ic ? "gi" : "g"); } catch (_) { return text; }
      const frag = document.createDocumentFragment();
      let last = 0, m;
      while ((m = re.exec(text)) !== null) {
        if (!m[0]) { re.lastIndex++; continue; }
        frag.append(visible(text.slice(last, m.index), false), h("mark", { class: "hit" }, m[0]));
        last = m.index + m[0].length;
      }
      frag.append(visible(text.slice(last), false));
      return frag;
    }
    listeners.add((type, d) => {
      if (d.sessionId === id && (type === "session.ended" || type === "session.backgrounded")) refresh();
    });
    const timer = setInterval(() => { if (entry && entry.state === "running") refresh(); }, 5000);
    page.close = () => {
      clearInterval(timer);
      if (es) es.close();
      if (playing) playing.cancel();
      if (term) term.dispose();
      if (page.onResize) window.removeEventListener("resize", page.onResize);
    };
    page.key = (e) => {
      if (e.key === "/") { searchIn.focus(); return true; }
      if (e.key === "i") { (entry && entry.pty && term ? term : inputIn).focus(); return true; }
      return false;
    };
    refresh().then(ok => { if (ok) startStream(); });
    return page;
  }

  // ---------- nodes ----------
  function nodesPage() {
    const page = {};
    const body = h("div", { id: "nodes-body" });
    const bind = h("div", { id: "bindings" });
    main.append(h("div", { class: "row" }, h("h1", {}, "Nodes"), h("span", { class: "spacer" }),
      h("button", { type: "button", id: "invite", onclick: invite }, "Create invite")), body,
      h("h2", {}, "Per-agent node binding"), h("p", { class: "muted" }, "An agent's exec defaults can bind its host=node runs to one node."), bind);
    let nodes = [];
    function nodeId(n) { return n.nodeId || n.id; }
    function table(title, list, pending) {
      return [h("h2", {}, title + " (" + list.length + ")"), list.length ? h("div", { class: "scroll" }, h("table", {},
        h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Node id"), h("th", { class: "hide-narrow" }, "Platform"), h("th", { class: "hide-narrow" }, "Address"), h("th", {}, pending ? "Requested" : "Last seen"), h("th", {}, ""))),
        h("tbody", {}, list.map(n => h("tr", {},
          h("td", {}, n.name || "—"), h("td", { class: "mono" }, nodeId(n)),
          h("td", { class: "hide-narrow" }, [n.platform, n.arch].filter(Boolean).join("/") || "—"),
          h("td", { class: "hide-narrow mono" }, n.remoteIp || "—"),
          h("td", {}, fmtTime(n.requestedAtMs || n.lastSeenAtMs || n.connectedAtMs || n.pairedAtMs)),
          h("td", {}, h("div", { class: "row" }, pending ? h("button", { class: "ok", type: "button", onclick: () => act("POST", "/approve", n, "approved") }, "Approve") : null,
            pending ? h("button", { class: "bad", type: "button", onclick: () => act("DELETE", "", n, "rejected") }, "Reject")
              : twoStep("Remove", "Really remove?", () => act("DELETE", "", n, "removed"))))))))) :
        h("p", { class: "muted" }, "None.")];
    }
    async function load() {
      try {
        const r = await api("GET", "/v1/nodes");
        const paired = r.paired || r.nodes || [];
        const pending = r.pending || [];
        nodes = paired;
        body.replaceChildren(...table("Connected", paired.filter(n => n.connected), false),
          ...table("Offline", paired.filter(n => !n.connected), false), ...table("Pending pairing", pending, true));
      } catch (ex) {
        nodes = [];
        const unavailable = ex.status === 503 || ex.status === 404;
        body.replaceChildren(h("div", { class: "empty", id: "nodes-unavailable" },
          unavailable ? "Node hosts are not available on this gateway (" + ex.message + ")." : "Could not load nodes: " + ex.message));
        document.getElementById("invite").disabled = unavailable;
      }
      loadBindings();
    }
    async function act(method, suffix, n, what) {
      try {
        await api(method, "/v1/nodes/" + encodeURIComponent(nodeId(n)) + suffix);
        toast((n.name || nodeId(n)) + " " + what);
      } catch (ex) { toast(ex.message); }
      load();
    }
    async function invite() {
      try {
        const r = await api("POST", "/v1/nodes/invites", { ttl: "24h", once: true });
        body.prepend(h("div", { class: "banner" }, "Join token (shown once, valid until " + fmtTime(r.expiresAtMs) + "): ", h("code", {}, r.token),
          h("div", { class: "muted" }, "On the node: conch node --gateway " + location.origin + " --token " + r.token)));
      } catch (ex) { toast(ex.message); }
    }
    async function loadBindings() {
      try {
        const r = await api("GET", "/v1/agents");
        const rows = await Promise.all((r.agents || []).map(async a => {
          const d = await api("GET", "/v1/agents/" + encodeURIComponent(a.name) + "/exec-defaults").catch(() => ({}));
          const sel = h("select", { "aria-label": "Node for agent " + a.name },
            h("option", { value: "" }, "(unbound)"),
            nodes.map(n => h("option", { value: nodeId(n), selected: d.node === nodeId(n) || d.node === n.name }, (n.name || nodeId(n)))),
            d.node && !nodes.some(n => d.node === nodeId(n) || d.node === n.name) ? h("option", { value: d.node, selected: true }, d.node) : null);
          const save = h("button", { type: "button", onclick: async () => {
            try { await api("PUT", "/v1/agents/" + encodeURIComponent(a.name) + "/exec-defaults", Object.assign({}, d, { node: sel.value })); toast(a.name + ": node " + (sel.value || "unbound")); }
            catch (ex) { toast(ex.message); }
          } }, "Save");
          return h("tr", {}, h("td", {}, a.name), h("td", {}, d.host || "(from config)"), h("td", {}, h("div", { class: "row" }, sel, save)));
        }));
        bind.replaceChildren(h("div", { class: "scroll" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Agent"), h("th", {}, "Exec host"), h("th", {}, "Node"))), h("tbody", {}, rows))));
      } catch (ex) { bind.replaceChildren(h("p", { class: "error" }, ex.message)); }
    }
    const loadSoon = debounce(load, 300);
    listeners.add((type) => { if (type.startsWith("node.")) loadSoon(); });
    page.close = () => loadSoon.cancel();
    load();
    return page;
  }

  // ---------- policy ----------
  const ENUMS = { security: ["deny", "allowlist", "full"], ask: ["off", "on-miss", "always"], askFallback: ["deny", "allowlist", "full"] };
  function validateApprovals(text) {
    let f;
    try { f = JSON.parse(text); } catch (ex) { return ["Not valid JSON: " + ex.message]; }
    const errs = [];
    if (!f || typeof f !== "object" || Array.isArray(f)) return ["The file must be a JSON object."];
    if (f.version !== 1) errs.push("version must be 1.");
    const checkPolicy = (o, where) => {
      if (o === undefined) return;
      if (!o || typeof o !== "object" || Array.isArray(o)) { errs.push(where + " must be an object."); return; }
      for (const [k, vals] of Object.entries(ENUMS)) {
        if (o[k] !== undefined && !vals.includes(o[k])) errs.push(where + "." + k + " must be one of " + vals.join(", ") + ".");
      }
    };
    checkPolicy(f.defaults, "defaults");
    if (f.agents !== undefined) {
      if (!f.agents || typeof f.agents !== "object" || Array.isArray(f.agents)) errs.push("agents must be an object keyed by agent id.");
      else for (const [id, a] of Object.entries(f.agents)) {
        checkPolicy(a, "agents." + id);
        if (a && a.allowlist !== undefined) {
          if (!Array.isArray(a.allowlist)) errs.push("agents." + id + ".allowlist must be an array.");
          else a.allowlist.forEach((e, i) => {
            const p = typeof e === "string" ? e : e && e.pattern;
            if (typeof p !== "string" || !p.trim()) errs.push("agents." + id + ".allowlist[" + i + "] needs a pattern.");
          });
        }
      }
    }
    return errs;
  }
  function policyPage() {
    const page = {};
    const meta = h("p", { class: "muted", id: "policy-meta" }, "Loading…");
    const ta = h("textarea", { id: "policy-text", spellcheck: "false", "aria-label": "Approvals file (JSON)" });
    const errs = h("ul", { class: "error", id: "policy-errors", role: "alert" });
    const banner = h("div", { id: "policy-banner" });
    const saveBtn = h("button", { class: "primary", type: "button", id: "policy-save", onclick: () => save(false) }, "Save");
    const revertBtn = h("button", { type: "button", id: "policy-reload", onclick: () => load() }, "Reload");
    const exCmd = h("input", { type: "text", id: "explain-command", placeholder: "git status | head -n 5", "aria-label": "Command to explain", style: null });
    const exAgent = h("input", { type: "text", id: "explain-agent", value: "main", size: "10", "aria-label": "Agent" });
    const exCwd = h("input", { type: "text", id: "explain-cwd", placeholder: "(gateway cwd)", "aria-label": "Working directory" });
    const exOut = h("pre", { class: "explain", id: "explain-out", hidden: true });
    let hash = "", loaded = "";
    main.append(h("h1", {}, "Policy"), meta, banner,
      h("div", { class: "card" }, h("h3", {}, "Approvals file"), ta, errs, h("div", { class: "row" }, saveBtn, revertBtn,
        h("span", { class: "muted" }, "Saving needs the hash of the version you loaded; if the file changed meanwhile you choose what to keep."))),
      h("div", { class: "card" }, h("h3", {}, "Explain a command"),
        h("form", { class: "row", onsubmit: async (e) => {
          e.preventDefault();
          try {
            const r = await api("POST", "/v1/policy/explain", { agent: exAgent.value || "main", cwd: exCwd.value, command: exCmd.value, host: "gateway" });
            setText(exOut, r.text); exOut.hidden = false;
          } catch (ex) { setText(exOut, ex.message); exOut.hidden = false; }
        } }, h("label", {}, "Command", exCmd), h("label", {}, "Agent", exAgent), h("label", {}, "Directory", exCwd), h("button", { type: "submit" }, "Explain")),
        exOut));
    exCmd.style.minWidth = "min(360px, 80vw)";
    function validate() {
      const list = validateApprovals(ta.value);
      errs.replaceChildren(...list.map(e => h("li", {}, e)));
      saveBtn.disabled = list.length > 0 || ta.value === loaded;
      return list.length === 0;
    }
    ta.addEventListener("input", validate);
    async function load() {
      try {
        const r = await api("GET", "/v1/approvals-file");
        hash = r.hash || "";
        loaded = JSON.stringify(r.file || { version: 1 }, null, 2);
        ta.value = loaded;
        setText(meta, r.path + (r.exists ? "" : " (does not exist yet)") + " · hash " + (hash ? hash.slice(0, 12) + "…" : "—"));
        banner.replaceChildren();
        validate();
      } catch (ex) { setText(meta, ex.message); }
    }
    async function save(force) {
      if (!validate() && !force) return;
      let base = hash;
      if (force) {
        try { base = (await api("GET", "/v1/approvals-file")).hash || ""; } catch (ex) { toast(ex.message); return; }
      }
      try {
        const r = await api("PUT", "/v1/approvals-file", { file: JSON.parse(ta.value), baseHash: base });
        toast("Approvals file saved.");
        hash = r.hash;
        await load();
      } catch (ex) {
        if (ex.status === 409) {
          let theirs = null;
          try { theirs = await api("GET", "/v1/approvals-file"); } catch (_) { /* shown below */ }
          banner.replaceChildren(h("div", { class: "banner warn", id: "policy-conflict", role: "alert" },
            h("strong", {}, "Conflict: "), "the approvals file changed since you loaded it (" + ex.message + "). Your edits are still in the editor.",
            theirs ? h("details", {}, h("summary", {}, "Show the current file on disk"), h("pre", { class: "explain" }, JSON.stringify(theirs.file, null, 2))) : null,
            h("div", { class: "row" },
              h("button", { type: "button", id: "policy-take-theirs", onclick: () => load() }, "Discard mine, load current"),
              h("button", { type: "button", class: "bad", id: "policy-overwrite", onclick: () => save(true) }, "Overwrite with mine"))));
        } else {
          banner.replaceChildren(h("div", { class: "banner bad", role: "alert" }, "Not saved: " + ex.message));
        }
      }
    }
    const loadSoon = debounce(load, 300);
    page.close = () => loadSoon.cancel();
    listeners.add((type) => {
      if (type !== "policy.changed") return;
      if (ta.value === loaded) loadSoon();
      else if (!document.getElementById("policy-conflict")) banner.replaceChildren(h("div", { class: "banner warn" }, "The approvals file changed elsewhere; saving will ask what to keep."));
    });
    load();
    return page;
  }

  // ---------- agents ----------
  // twoStep makes a destructive button ask once more on its own label.
  function twoStep(label, confirmLabel, fn) {
    let armed = false, t = null;
    const b = h("button", { type: "button", class: "bad", onclick: async () => {
      if (!armed) {
        armed = true; setText(b, confirmLabel);
        t = setTimeout(() => { armed = false; setText(b, label); }, 4000);
        return;
      }
      clearTimeout(t); armed = false; setText(b, label);
      await fn();
    } }, label);
    return b;
  }
  function agentsPage() {
    const page = {};
    const body = h("tbody");
    const banner = h("div", { id: "agent-banner" });
    const name = h("input", { type: "text", id: "agent-name", placeholder: "build", "aria-label": "New agent id", pattern: "[a-z0-9][a-z0-9_\\-]{0,63}" });
    const ws = h("input", { type: "text", id: "agent-workspace", placeholder: "(gateway cwd)", "aria-label": "Workspace" });
    main.append(h("h1", {}, "Agents"), banner,
      h("form", { class: "card row", onsubmit: async (e) => {
        e.preventDefault();
        try {
          const r = await api("POST", "/v1/agents", { name: name.value.trim(), workspace: ws.value.trim() });
          showToken(r.name, r.token, "created");
          name.value = ""; ws.value = "";
          load();
        } catch (ex) { banner.replaceChildren(h("div", { class: "banner bad", role: "alert" }, ex.message)); }
      } }, h("label", {}, "Agent id", name), h("label", {}, "Workspace", ws), h("button", { type: "submit", class: "primary" }, "Create agent")),
      h("div", { class: "scroll" }, h("table", { id: "agents", class: "stack" }, h("thead", {}, h("tr", {},
        h("th", {}, "Agent"), h("th", {}, "Workspace"), h("th", {}, "Exec defaults"), h("th", {}, ""))), body)));
    function showToken(agent, token, what) {
      banner.replaceChildren(h("div", { class: "banner warn", role: "alert", id: "agent-token" },
        h("strong", {}, "Agent " + agent + " " + what + ". "), "Its token is shown once; give it to the MCP client now:",
        h("code", { class: "cmd" }, token),
        h("div", { class: "muted" }, "MCP URL " + location.origin + "/mcp, header Authorization: Bearer <token>")));
    }
    function defaultsEditor(a, d) {
      const sel = (key, vals) => h("select", { "aria-label": key + " for " + a.name, "data-key": key },
        h("option", { value: "" }, key + ": (config)"), vals.map(v => h("option", { value: v, selected: d[key] === v }, key + ": " + v)));
      const host = sel("host", ["sandbox", "gateway", "node"]), sec = sel("security", ["deny", "allowlist", "full"]), ask = sel("ask", ["off", "on-miss", "always"]);
      const node = h("input", { type: "text", value: d.node || "", placeholder: "node", size: "8", "aria-label": "node for " + a.name });
      return h("div", { class: "row" }, host, sec, ask, node,
        h("button", { type: "button", onclick: async () => {
          try {
            await api("PUT", "/v1/agents/" + encodeURIComponent(a.name) + "/exec-defaults", { host: host.value, security: sec.value, ask: ask.value, node: node.value.trim() });
            toast(a.name + ": exec defaults saved");
          } catch (ex) { toast(ex.message); }
        } }, "Save"),
        h("button", { type: "button", onclick: async () => {
          try { await api("DELETE", "/v1/agents/" + encodeURIComponent(a.name) + "/exec-defaults"); toast(a.name + ": exec defaults cleared"); load(); }
          catch (ex) { toast(ex.message); }
        } }, "Clear"));
    }
    async function load() {
      try {
        const r = await api("GET", "/v1/agents");
        const rows = await Promise.all((r.agents || []).map(async a => {
          const d = await api("GET", "/v1/agents/" + encodeURIComponent(a.name) + "/exec-defaults").catch(() => ({}));
          return h("tr", { "data-agent": a.name },
            h("td", { "data-label": "Agent" }, h("div", {}, h("strong", {}, a.name), h("div", { class: "muted" }, "since " + fmtTime(a.createdAt)))),
            h("td", { class: "mono", "data-label": "Workspace" }, a.workspace || "—"),
            h("td", { "data-label": "Defaults" }, defaultsEditor(a, d || {})),
            h("td", { "data-label": "Token" }, h("div", { class: "row" },
              h("button", { type: "button", onclick: async () => {
                try { const t = await api("POST", "/v1/agents/" + encodeURIComponent(a.name) + "/token"); showToken(a.name, t.token, "has a new token (the old one no longer works)"); }
                catch (ex) { toast(ex.message); }
              } }, "Rotate token"),
              twoStep("Remove", "Really remove?", async () => {
                try { await api("DELETE", "/v1/agents/" + encodeURIComponent(a.name)); toast(a.name + " removed"); load(); }
                catch (ex) { toast(ex.message); }
              }))));
        }));
        body.replaceChildren(...(rows.length ? rows : [h("tr", {}, h("td", { colspan: "4", class: "muted" }, "No agents."))]));
      } catch (ex) { body.replaceChildren(h("tr", {}, h("td", { colspan: "4", class: "error" }, ex.message))); }
    }
    load();
    return page;
  }

  // ---------- ledger ----------
  function ledgerSummary(x) {
    switch (x.type) {
      case "evaluate": return (x.outcome || "") + " · " + (x.command || "");
      case "request": return "approval " + (x.slug || "") + " requested";
      case "decision": return (x.decision || "") + " by " + (x.decidedBy || "?") + (x.fallback ? " (fallback " + x.fallback + ")" : "");
      case "exec": return (x.host || "") + " · " + (x.argv ? x.argv.join(" ") : "") + (x.sessionId ? " · " + x.sessionId : "");
      case "end": return (x.state || "") + (x.exitCode !== undefined && x.exitCode !== null ? " exit " + x.exitCode : "") + (x.sessionId ? " · " + x.sessionId : "");
      case "policy": return (x.file || "") + " by " + (x.by || "?");
      case "node": return (x.action || "") + " " + (x.name || x.nodeId || "");
      default: return "";
    }
  }
  function ledgerPage() {
    const page = {};
    const f = {};
    const initial = new URLSearchParams(location.search);
    const field = (key, label, size) => (f[key] = h("input", { type: "text", id: "ledger-" + key, size: size || "12", "aria-label": label, placeholder: label, value: initial.get(key) || "" }));
    const body = h("tbody");
    const verifyOut = h("div", { id: "ledger-verify" });
    main.append(h("div", { class: "row" }, h("h1", {}, "Ledger"), h("span", { class: "spacer" }),
      h("button", { type: "button", id: "ledger-verify-btn", onclick: verify }, "Verify chain")), verifyOut,
      h("form", { class: "card row", onsubmit: (e) => { e.preventDefault(); load(); } },
        field("agent", "agent"), field("session", "session id"), field("approval", "approval id or slug"), field("limit", "limit (100)", "6"),
        h("button", { type: "submit" }, "Filter")),
      h("div", { class: "scroll" }, h("table", { id: "ledger", class: "stack" }, h("thead", {}, h("tr", {},
        h("th", {}, "Seq"), h("th", {}, "When"), h("th", {}, "Type"), h("th", {}, "Agent"), h("th", {}, "What"))), body)));
    async function load() {
      const q = new URLSearchParams();
      for (const k of ["agent", "session", "approval", "limit"]) if (f[k].value.trim()) q.set(k, f[k].value.trim());
      try {
        const r = await api("GET", "/v1/ledger?" + q.toString());
        const recs = (r.records || []).slice().reverse();
        body.replaceChildren(...(recs.length ? recs.map(x => h("tr", {},
          h("td", { class: "mono", "data-label": "Seq" }, x.seq),
          h("td", { "data-label": "When" }, fmtTime(Date.parse(x.ts))),
          h("td", { "data-label": "Type" }, x.type),
          h("td", { "data-label": "Agent" }, x.agent || "—"),
          h("td", { class: "cmdcell", "data-label": "What" }, h("details", {}, h("summary", {}, ledgerSummary(x) || "details"),
            h("pre", { class: "explain" }, JSON.stringify(x, null, 2)))))) : [h("tr", {}, h("td", { colspan: "5", class: "muted" }, "No records match."))]));
      } catch (ex) { body.replaceChildren(h("tr", {}, h("td", { colspan: "5", class: "error" }, ex.message))); }
    }
    async function verify() {
      try {
        const r = await api("POST", "/v1/ledger/verify", {});
        verifyOut.replaceChildren(h("div", { class: "banner " + (r.ok ? "" : "bad"), role: "status" },
          r.ok ? "Chain intact: " + r.records + " records in " + r.files + " file(s), head " + (r.head || "").slice(0, 12) + "…"
            : "Chain BROKEN at seq " + r.brokenAt + (r.file ? " (" + r.file + ":" + r.line + ")" : "") + ": " + (r.reason || "")));
      } catch (ex) { verifyOut.replaceChildren(h("div", { class: "banner bad" }, ex.message)); }
    }
    load();
    return page;
  }

  // ---------- doctor ----------
  function doctorPage() {
    const page = {};
    const list = h("div", { id: "doctor" });
    main.append(h("div", { class: "row" }, h("h1", {}, "Doctor"), h("span", { class: "spacer" }), h("button", { type: "button", onclick: () => load() }, "Run again")),
      h("p", { class: "muted" }, "Safe fixes: run ", h("code", {}, "conch doctor --fix"), " on the gateway's machine."), list);
    async function load() {
      try {
        const r = await api("GET", "/v1/doctor");
        const order = { error: 0, warn: 1, info: 2 };
        const fs = (r.findings || []).slice().sort((a, b) => (order[a.level] ?? 3) - (order[b.level] ?? 3));
        list.replaceChildren(...(fs.length ? fs.map(x => h("div", { class: "card finding" },
          h("div", { class: "row" }, h("span", { class: "state " + (x.level === "error" ? "failed" : x.level === "warn" ? "warn" : "") }, x.level), h("code", {}, x.id)),
          h("p", {}, x.message))) : [h("div", { class: "empty" }, "No findings.")]));
      } catch (ex) { list.replaceChildren(h("p", { class: "error" }, ex.message)); }
    }
    load();
    return page;
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
