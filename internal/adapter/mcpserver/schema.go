package mcpserver

// Input schemas: JSON Schema objects without
// additionalProperties, enums for the closed sets, and each number's
// range (apitype's range tags; a test keeps them equal): as minimum and
// maximum where conch refuses a value outside it, in the description
// where conch clamps (so that a client validating against the schema
// does not refuse what conch takes). conch checks the arguments itself,
// so the texts of its errors are conch's.
const execSchema = `{
 "type": "object",
 "additionalProperties": false,
 "required": ["command"],
 "properties": {
  "command": {"type": "string", "description": "Shell command to run."},
  "workdir": {"type": "string", "description": "Working directory (default: the agent workspace)."},
  "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Environment overrides. PATH, LD_*/DYLD_* and other dangerous keys are rejected on host runs."},
  "yieldMs": {"type": "number", "description": "Milliseconds to wait before continuing in the background (default 10000; 0 means 10; clamped to 0-120000)."},
  "background": {"type": "boolean", "description": "Return at once with a running session id (stdin stays open for process write)."},
  "timeout": {"type": "number", "description": "SECONDS (not ms) before the command is killed (default 1800; 0 or less: none; clamped to at most 31536000)."},
  "timeoutSeconds": {"type": "number", "description": "Alias of timeout, in seconds (clamped to 0-31536000)."},
  "pty": {"type": "boolean", "description": "Run under a pseudo-terminal (120x30) for programs that need a terminal."},
  "host": {"type": "string", "enum": ["sandbox", "gateway", "node"], "description": "Where the command runs: sandbox, gateway (the conch machine) or node (a remote node, see node)."},
  "security": {"type": "string", "enum": ["deny", "allowlist", "full"], "description": "Enforcement mode; may only tighten the configured one."},
  "ask": {"type": "string", "enum": ["off", "on-miss", "always"], "description": "Approval prompting; may only tighten the configured one."},
  "node": {"type": "string", "description": "Node id, name, IP or id prefix for host=node."},
  "elevated": {"type": "boolean", "description": "Request elevated mode."},
  "idempotencyKey": {"type": "string", "maxLength": 128, "description": "De-duplicates retries (1-128 of [A-Za-z0-9._:-])."}
 }
}`

const processSchema = `{
 "type": "object",
 "additionalProperties": false,
 "required": ["action"],
 "properties": {
  "action": {"type": "string", "enum": ["list", "poll", "log", "wait", "search", "screen", "write", "send-keys", "submit", "paste", "kill", "clear", "remove"], "description": "list: your sessions.\npoll: output new since your last read, and the state.\nlog: output lines (offset/limit, or since).\nwait: block until a condition (until) holds; returns the new output too.\nsearch: regex over the output.\nscreen: the terminal as shown (pty).\nwrite: send data to stdin.\nsend-keys: send keys (Enter, C-c, Up) (pty).\nsubmit: send data (if any), then Enter.\npaste: paste text.\nkill: stop the process.\nclear: delete a finished session.\nremove: stop if running, then delete."},
  "sessionId": {"type": "string", "description": "Session id (all actions but list)."},
  "data": {"type": "string", "description": "write: bytes to send to stdin. submit: the line to send before the Enter."},
  "eof": {"type": "boolean", "description": "write: close stdin after writing."},
  "keys": {"type": "array", "items": {"type": "string"}, "description": "send-keys: key tokens (Enter, C-c, Up, M-x, ^D, F5, ...)."},
  "hex": {"type": "array", "items": {"type": "string"}, "description": "send-keys: bytes as hex (0d, 0x1b)."},
  "literal": {"type": "string", "description": "send-keys: text sent as is."},
  "delayMs": {"type": "number", "description": "send-keys: pause between tokens, milliseconds (clamped to 0-1000)."},
  "text": {"type": "string", "description": "paste: text to paste."},
  "bracketed": {"type": "boolean", "description": "paste: wrap in bracketed-paste markers when the program enabled them (default true)."},
  "offset": {"type": "number", "description": "log: first line (0-based; an integer: fractions are floored, negatives read as 0)."},
  "limit": {"type": "number", "description": "log: number of lines (an integer: fractions are floored, negatives read as 0)."},
  "since": {"type": "number", "description": "poll/log/search/wait: a cursor from an earlier result: only output after it (an integer, 0 to 9007199254740992; clamped)."},
  "raw": {"type": "boolean", "description": "poll/log: keep terminal escapes."},
  "stream": {"type": "string", "enum": ["both", "stdout", "stderr"], "description": "poll/log/search: which stream (default both)."},
  "timeout": {"type": "number", "description": "MILLISECONDS (not seconds). poll: wait this long for the end (default 0; clamped to 0-120000); wait: give up after (default 30000; clamped to 0-600000)."},
  "until": {"anyOf": [{"type": "string", "enum": ["exit", "regex", "port", "http", "file", "idle"]}, {"type": "array", "items": {"type": "string", "enum": ["exit", "regex", "port", "http", "file", "idle"]}}], "description": "wait: exit (default), regex (pattern), port, http (url), file (path), idle (idleMs); an array: the first."},
  "pattern": {"type": "string", "description": "wait (regex), search: RE2 pattern."},
  "ignoreCase": {"type": "boolean"},
  "host": {"type": "string", "description": "wait until=port: host to connect to (default 127.0.0.1). Not where commands run."},
  "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "wait (port): TCP port."},
  "url": {"type": "string", "description": "wait (http): URL."},
  "path": {"type": "string", "description": "wait (file): path relative to the session cwd."},
  "idleMs": {"type": "number", "description": "wait (idle): milliseconds without output (clamped to 100-3600000)."},
  "context": {"type": "number", "description": "search: lines of context (an integer, clamped to 0-20)."},
  "max": {"type": "number", "description": "search: matches returned (default 50; an integer, clamped to 1-1000)."}
 }
}`

const patchSchema = `{
 "type": "object",
 "additionalProperties": false,
 "required": ["input"],
 "properties": {
  "input": {"type": "string", "description": "The whole patch, from '*** Begin Patch' to '*** End Patch' (at most 8 MiB)."}
 }
}`
