#!/usr/bin/env bash
# Builds conch and loadbench into a temporary directory and runs the load
# benchmark of `conch serve` against the fresh build (see bench/README.md).
#
#   bash bench/load.sh                       # 50 agents x 20 execs in flight, 30 s
#   bash bench/load.sh -duration 10s         # shorter
#   bash bench/load.sh -agents 10 -inflight 4 -duration 5s --json
#
# Arguments are passed to loadbench. Everything stays on loopback; the run
# is bounded in time and count and stops by itself. The exit status is
# loadbench's: non-zero when an exec failed or something was left running,
# never because conch was slow.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/loadbench-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cd "$root"
echo "bench/load.sh: building conch and loadbench in $tmp" >&2
go build -o "$tmp/conch" ./cmd/conch
go build -o "$tmp/loadbench" ./bench/cmd/loadbench

# Run from the temporary directory so nothing lands in the work tree.
cd "$tmp"
"$tmp/loadbench" -conch "$tmp/conch" "$@"
