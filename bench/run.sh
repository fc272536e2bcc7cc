#!/usr/bin/env bash
# Builds conch and conchbench into a temporary directory and runs the
# whole-binary benchmarks against the fresh build (see bench/README.md).
#
#   bash bench/run.sh                  # full run, 1 GiB step included
#   BENCH_QUICK=1 bash bench/run.sh    # skip the 1 GiB step
#   bash bench/run.sh -n 50 -sessions 50 -bytes 10485760 --json
#
# Arguments are passed to conchbench; later flags win, so -big=false
# also skips the 1 GiB step. The exit status is conchbench's: non-zero
# when conch misbehaved, never because it was slow.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/conchbench-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cd "$root"
echo "bench/run.sh: building conch and conchbench in $tmp" >&2
# conch-shim beside conch, as go install puts it (conch starts every
# command under it); hello is step start's baseline.
go build -o "$tmp/" ./cmd/conch ./cmd/conch-shim
go build -o "$tmp/conchbench" ./bench/cmd/conchbench
go build -o "$tmp/hello" ./bench/cmd/hello

args=()
if [ "${BENCH_QUICK:-0}" != 1 ]; then
	args+=(-big)
fi
# Run from the temporary directory so nothing lands in the work tree.
cd "$tmp"
"$tmp/conchbench" -conch "$tmp/conch" -hello "$tmp/hello" ${args[@]+"${args[@]}"} "$@"
