#!/usr/bin/env bash
# Builds conch and nodebench into a temporary directory and measures node
# hosts against local execution in one run (bench/README.md, "Node hosts").
#
#   bash bench/nodes.sh                 # n=200 round trips, 50 MB throughput
#   bash bench/nodes.sh -n 50 -bytes 10485760 --json
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nodebench-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$root"
go build -o "$tmp/conch" ./cmd/conch
go build -o "$tmp/nodebench" ./bench/cmd/nodebench
cd "$tmp"
"$tmp/nodebench" -conch "$tmp/conch" "$@"
