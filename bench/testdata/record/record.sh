#!/usr/bin/env bash
# Records the raw terminal output samples in bench/testdata/ (see the
# "agent" section of bench/README.md). Offline and loopback only:
#
#   pip-install.raw    real pip, from a PEP 503 index served on 127.0.0.1 (mkwheels.py, slowserve.py)
#   npm-install.raw    real npm, from a registry served on 127.0.0.1 (mknpm.py, slowserve.py)
#   cargo-build.raw    real cargo, a workspace of path dependencies (mkcargo.sh), --offline
#   npm6-install.raw   npm 6's progress bar, simulated (npm6sim.py)
#   service-log.raw    a long log with repeated lines, generated (mklog.py)
#
# The real tools run on a pseudo-terminal (util-linux `script`) 100
# columns wide, so they draw progress bars and colours as they do for a
# person; the terminal turns LF into CRLF. Needs python3, script, and
# pip / npm / cargo for their samples (a missing tool skips its sample).
#
#   bash bench/testdata/record/record.sh [OUTDIR]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(cd "${1:-$here/..}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/conch-record.XXXXXX")
srv=""
cleanup() {
	if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# serve DIR RATE: starts slowserve.py on 127.0.0.1 and sets $port.
serve() {
	rm -f "$tmp/port"
	python3 "$here/slowserve.py" "$1" "$tmp/port" "$2" 2>>"$tmp/serve.log" &
	srv=$!
	for _ in $(seq 1 100); do
		[ -s "$tmp/port" ] && break
		sleep 0.05
	done
	port=$(cat "$tmp/port")
}
unserve() {
	kill "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || true
	srv=""
}
# onpty DIR CMD: runs CMD in DIR on a 100x30 pseudo-terminal, output on stdout.
onpty() {
	(cd "$1" && script -q -e -c "stty cols 100 rows 30; $2" /dev/null)
}
have() { command -v "$1" >/dev/null 2>&1; }

if have pip; then
	echo "record: pip $(pip --version | cut -d' ' -f2)" >&2
	python3 "$here/mkwheels.py" "$tmp/pypi"
	serve "$tmp/pypi" 1500000
	# No site configuration: no pip.conf, no PIP_* variables (find-links, ...).
	for v in $(compgen -e | grep '^PIP_' || true); do unset "$v"; done
	PIP_CONFIG_FILE=/dev/null onpty "$tmp" "pip install --no-cache-dir --index-url http://127.0.0.1:$port/simple/ --target $tmp/site conch-demo-app" >"$out/pip-install.raw"
	unserve
fi

if have npm; then
	echo "record: npm $(npm --version)" >&2
	mkdir -p "$tmp/npmreg" "$tmp/app"
	serve "$tmp/npmreg" 700000
	python3 "$here/mknpm.py" "$tmp/npmreg" "$port"
	echo '{"name":"my-app","version":"1.0.0","private":true,"dependencies":{"conch-demo-server":"^4.2.0","conch-demo-bundler":"^7.0.0"}}' >"$tmp/app/package.json"
	: >"$tmp/npmrc"
	NPM_CONFIG_USERCONFIG="$tmp/npmrc" onpty "$tmp/app" "npm install --registry http://127.0.0.1:$port/ --cache $tmp/npmcache" >"$out/npm-install.raw"
	unserve
fi

if have cargo; then
	echo "record: $(cargo --version)" >&2
	bash "$here/mkcargo.sh" "$tmp/ws"
	CARGO_TARGET_DIR="$tmp/target" onpty "$tmp/ws" "cargo build --offline" >"$out/cargo-build.raw"
fi

python3 "$here/npm6sim.py" >"$out/npm6-install.raw"
python3 "$here/mklog.py" >"$out/service-log.raw"
ls -l "$out"/*.raw >&2
