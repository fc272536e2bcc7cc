#!/usr/bin/env bash
# Builds conch and agentbench into a temporary directory and runs the
# agent-feature benchmarks against the fresh build (see bench/README.md,
# "Agent features"): regex wait latency, search over a 100 MB journal,
# and the token savings of cleaned output on the samples in bench/testdata.
#
#   bash bench/agent.sh                          # all three steps (~1.5 min)
#   bash bench/agent.sh -steps tokens            # one step
#   bash bench/agent.sh -n 20 -search-bytes 20000000 --json
#
# Arguments are passed to agentbench. Loopback only; every step is bounded
# and cleans up after itself. The exit status is agentbench's: non-zero
# when conch misbehaved, never because it was slow.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentbench-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cd "$root"
echo "bench/agent.sh: building conch and agentbench in $tmp" >&2
go build -o "$tmp/conch" ./cmd/conch
go build -o "$tmp/agentbench" ./bench/cmd/agentbench

# Run from the temporary directory so nothing lands in the work tree.
cd "$tmp"
"$tmp/agentbench" -conch "$tmp/conch" -testdata "$root/bench/testdata" "$@"
