#!/usr/bin/env node
// Cross-client check of `conch serve`: the official TypeScript MCP SDK client
// over streamable HTTP with a bearer agent token.
//
//   node e2e/ts-client.mjs URL TOKEN
//   CONCH_MCP_URL=http://127.0.0.1:PORT/mcp CONCH_TOKEN=cat_... node e2e/ts-client.mjs
//
// Prefer the environment for the token (argv is visible in the process list).
// It lists the tools, runs a foreground exec, runs a background exec and polls
// it with `process poll` until it ends, and waits for an exit notice sent as
// `notifications/message` after `logging/setLevel`, then makes results of every
// process action and of failures, which the SDK validates against each tool's
// outputSchema (a mismatch throws). It prints one JSON summary
// on stdout and exits 0 only when every check passed (1 on a failed check,
// 2 on bad usage). Progress and errors go to stderr.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const url = process.argv[2] || process.env.CONCH_MCP_URL;
const token = process.argv[3] || process.env.CONCH_TOKEN;
if (!url || !token) {
  console.error("usage: node ts-client.mjs URL TOKEN   (or CONCH_MCP_URL and CONCH_TOKEN)");
  process.exit(2);
}
// Every step and the whole run are bounded in time.
const STEP_MS = Number(process.env.CONCH_TS_STEP_MS || 20000);
const NOTICE_MS = Number(process.env.CONCH_TS_NOTICE_MS || 10000);
const TOTAL_MS = Number(process.env.CONCH_TS_TOTAL_MS || 90000);

const summary = {
  ok: false,
  url,
  sdk: "@modelcontextprotocol/sdk",
  server: null,
  protocolVersion: null,
  tools: [],
  echo: null,
  background: null,
  notification: { setLevel: false, received: false },
  schema: { calls: 0, errors: [], instructions: 0, annotations: {} },
  inlineEvents: [],
  failures: [],
};
const fail = (msg) => {
  summary.failures.push(msg);
  console.error("ts-client: FAIL " + msg);
};
const log = (msg) => console.error("ts-client: " + msg);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function finish(code) {
  summary.ok = code === 0 && summary.failures.length === 0;
  process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
  process.exit(summary.ok ? 0 : code || 1);
}
const overall = setTimeout(() => {
  fail(`run took longer than ${TOTAL_MS} ms`);
  finish(1);
}, TOTAL_MS);
overall.unref();

// text joins the text parts of a tool result and moves the inline
// "[conch event] ..." lines at its top to summary.inlineEvents.
function text(res) {
  let t = (res.content || [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
  while (t.startsWith("[conch event] ")) {
    const nl = t.indexOf("\n");
    const line = nl < 0 ? t : t.slice(0, nl);
    summary.inlineEvents.push(line);
    t = nl < 0 ? "" : t.slice(nl + 1).replace(/^\n/, "");
  }
  return t;
}
const details = (res) => res.structuredContent || {};

const notices = [];
const client = new Client({ name: "conch-e2e-ts", version: "1.0.0" });
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  notices.push({ at: Date.now(), params: n.params });
});
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const opt = { timeout: STEP_MS };
const call = (name, args) => client.callTool({ name, arguments: args }, undefined, opt);

try {
  await client.connect(transport, opt);
  summary.server = client.getServerVersion() || null;
  summary.protocolVersion = transport.protocolVersion || null;
  log(`connected to ${JSON.stringify(summary.server)} (protocol ${summary.protocolVersion})`);

  // 1. tools/list
  const tl = await client.listTools(undefined, opt);
  summary.tools = tl.tools.map((t) => t.name).sort();
  for (const t of tl.tools) {
    summary.schema.annotations[t.name] = t.annotations || null;
    if (!t.outputSchema) fail(`${t.name} has no outputSchema`);
  }
  summary.schema.instructions = (client.getInstructions() || "").length;
  for (const want of ["exec", "process"]) {
    if (!summary.tools.includes(want)) fail(`tools/list lacks ${want}: ${summary.tools.join(",")}`);
  }

  // 2. logging/setLevel first, so that the exit notice of step 4 can be sent.
  try {
    await client.setLoggingLevel("info", opt);
    summary.notification.setLevel = true;
  } catch (e) {
    fail(`logging/setLevel: ${e.message}`);
  }

  // 3. foreground exec
  const er = await call("exec", { command: "echo ts-hi" });
  const et = text(er);
  summary.echo = { text: et, isError: !!er.isError, status: details(er).status ?? null, exitCode: details(er).exitCode ?? null };
  if (er.isError || et !== "ts-hi") fail(`exec echo ts-hi: isError=${!!er.isError} text=${JSON.stringify(et)}`);

  // 4. A background session that is never polled: its end must be announced
  //    as notifications/message (a poll that sees the end would drop the notice).
  const nr = await call("exec", { command: "sleep 0.3; echo ts-notice", background: true });
  const noticeId = details(nr).sessionId;
  if (!noticeId) fail(`background exec (notice) gave no sessionId: ${text(nr)}`);

  // 5. A background session polled with `process poll` until it ends.
  const br = await call("exec", { command: "echo bg-1; sleep 0.5; echo bg-2", background: true });
  const bgId = details(br).sessionId;
  const bg = { sessionId: bgId ?? null, startStatus: details(br).status ?? null, polls: 0, status: null, state: null, exitCode: null, output: [], last: null };
  summary.background = bg;
  if (!bgId || bg.startStatus !== "running") {
    fail(`background exec: status=${bg.startStatus} text=${JSON.stringify(text(br))}`);
  } else {
    const deadline = Date.now() + STEP_MS;
    for (;;) {
      const pr = await call("process", { action: "poll", sessionId: bgId, timeout: 250 });
      const pd = details(pr);
      const pt = text(pr);
      bg.polls++;
      bg.status = pd.status ?? null;
      bg.state = pd.state ?? null;
      bg.exitCode = pd.exitCode ?? null;
      bg.last = pt;
      for (const l of pt.split("\n")) if (/^bg-\d$/.test(l)) bg.output.push(l);
      if (pr.isError) {
        fail(`process poll: ${pt}`);
        break;
      }
      if (bg.status !== "running") break;
      if (Date.now() > deadline) {
        fail(`background session ${bgId} still running after ${STEP_MS} ms`);
        break;
      }
    }
    if (bg.status !== "completed" || bg.exitCode !== 0) fail(`background end: status=${bg.status} exitCode=${bg.exitCode}`);
    if (bg.output.join(",") !== "bg-1,bg-2") fail(`background output over polls: ${JSON.stringify(bg.output)}`);
    if (!/Process exited with code 0\.$/.test(bg.last || "")) fail(`last poll text: ${JSON.stringify(bg.last)}`);
  }

  // 6. Wait for the exit notice of step 4.
  if (noticeId) {
    const start = Date.now();
    const match = (n) => n.params?.data?.sessionId === noticeId;
    while (!notices.some(match) && Date.now() - start < NOTICE_MS) await sleep(50);
    const n = notices.find(match);
    Object.assign(summary.notification, {
      sessionId: noticeId,
      received: !!n,
      waitedMs: Date.now() - start,
      logger: n?.params?.logger ?? null,
      level: n?.params?.level ?? null,
      kind: n?.params?.data?.kind ?? null,
      text: n?.params?.data?.text ?? null,
      others: notices.filter((x) => !match(x)).map((x) => x.params?.data?.text ?? x.params?.data ?? null),
    });
    if (!n) {
      fail(`no notifications/message exit notice for ${noticeId} within ${NOTICE_MS} ms (${notices.length} other messages)`);
    } else {
      const want = `Exec completed (${noticeId}, code 0) :: ts-notice`;
      if (n.params.logger !== "conch.exec" || n.params.data?.kind !== "completed" || n.params.data?.text !== want) {
        fail(`exit notice: ${JSON.stringify(n.params)}, want text ${JSON.stringify(want)}`);
      }
    }
  }

  // 7. Results of every kind, each checked by the SDK against the tool's
  //    outputSchema: a mismatch makes callTool throw.
  const checked = async (name, args) => {
    summary.schema.calls++;
    try {
      return await call(name, args);
    } catch (e) {
      summary.schema.errors.push(`${name} ${JSON.stringify(args)}: ${e.message}`);
      fail(`${name} ${JSON.stringify(args)}: ${e.message}`);
      return { content: [], structuredContent: {} };
    }
  };
  await checked("exec", { command: "echo out; echo err >&2; exit 3" });
  await checked("exec", { command: "true", yieldMs: -1 });
  const sr = await checked("exec", { command: "echo s-1; cat", background: true });
  const sid = details(sr).sessionId;
  for (const args of [
    { action: "list" },
    { action: "poll", sessionId: sid },
    { action: "log", sessionId: sid, offset: 0, limit: 5 },
    { action: "wait", sessionId: sid, until: "regex", pattern: "s-1", timeout: 10000 },
    { action: "wait", sessionId: sid, until: ["idle", "regex"], idleMs: 100, pattern: "never", timeout: 10000 },
    { action: "wait", sessionId: sid, until: "regex", pattern: "never", timeout: 100 },
    { action: "search", sessionId: sid, pattern: "s-", context: 1 },
    { action: "screen", sessionId: sid },
    { action: "write", sessionId: sid, data: "w-1\n" },
    { action: "submit", sessionId: sid },
    { action: "paste", sessionId: sid, text: "p-1" },
    { action: "send-keys", sessionId: sid, keys: ["Enter"] },
    { action: "poll", sessionId: sid, timeout: "5000" },
    { action: "kill", sessionId: sid },
    { action: "wait", sessionId: sid, timeout: 10000 },
    { action: "poll", sessionId: sid },
    { action: "log", sessionId: sid, since: 0 },
    { action: "kill", sessionId: sid },
    { action: "clear", sessionId: sid },
    { action: "remove", sessionId: sid },
    { action: "poll", sessionId: "no-such-session" },
    { action: "nope" },
  ]) {
    await checked("process", args);
  }

  // 8. Nothing of ours is left running.
  const lr = await call("process", { action: "list" });
  const running = (details(lr).sessions || []).filter((s) => s.status === "running").map((s) => s.sessionId);
  summary.runningAfter = running;
  if (running.length) fail(`sessions still running: ${running.join(",")}`);
} catch (e) {
  fail(`${e.name || "Error"}: ${e.message}`);
}
try {
  await transport.terminateSession();
} catch {
  // servers may refuse DELETE; not a failure of this check
}
await client.close().catch(() => {});
finish(summary.failures.length ? 1 : 0);
