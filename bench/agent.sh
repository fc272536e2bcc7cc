#!/usr/bin/env bash
# Builds conch and agentbench into a temporary directory and runs the
# agent-feature benchmarks against the fresh build (see bench/README.md,
# "Agent features"): regex wait latency, search over a 100 MB journal,
# the token savings of cleaned output on the samples in bench/testdata,
# the calls an agent needs to start a dev server, wait for it and see its
# first request (with the size of tools/list), and the first-call latency
# of a fresh engine against its yieldMs.
#
#   bash bench/agent.sh                          # all five steps (~2.5 min)
#   bash bench/agent.sh -steps tokens            # one step
#   bash bench/agent.sh -n 20 -search-bytes 20000000 --json
#   bash bench/agent.sh --baseline main -steps devserver   # before (main) and after (this tree)
#   bash bench/agent.sh --baseline main -steps first -first-n 5
#
# --baseline REF (first argument) also builds conch from the git commit
# REF (git archive, nothing in the work tree changes) and runs steps
# devserver and first against it as the "before". Other arguments are passed to
# agentbench. Loopback only; every step is bounded
# and cleans up after itself. The exit status is agentbench's: non-zero
# when conch misbehaved, never because it was slow.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentbench-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

baseline=()
if [ "${1:-}" = "--baseline" ]; then
	ref=${2:?--baseline needs a git commit}
	shift 2
	echo "bench/agent.sh: building conch at $ref in $tmp/baseline-src" >&2
	mkdir "$tmp/baseline-src"
	git -C "$root" archive "$ref" | tar -x -C "$tmp/baseline-src"
	(cd "$tmp/baseline-src" && go build -o "$tmp/conch-baseline" ./cmd/conch)
	baseline=(-baseline-conch "$tmp/conch-baseline")
fi

cd "$root"
echo "bench/agent.sh: building conch and agentbench in $tmp" >&2
go build -o "$tmp/conch" ./cmd/conch
go build -o "$tmp/agentbench" ./bench/cmd/agentbench

# Run from the temporary directory so nothing lands in the work tree.
cd "$tmp"
"$tmp/agentbench" -conch "$tmp/conch" "${baseline[@]}" -testdata "$root/bench/testdata" "$@"
