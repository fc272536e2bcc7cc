#!/usr/bin/env bash
# Builds conch and patchbench into a temporary directory and compares
# apply_patch with git apply on the same edits of a 10 MB file with 1,000
# hunks (see bench/README.md). Arguments go to patchbench
# (-lines N, -hunks N, -reps N).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/patchbench-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cd "$root"
command -v git >/dev/null || { echo "bench/patch.sh: git is not installed" >&2; exit 1; }
echo "bench/patch.sh: building conch and patchbench in $tmp" >&2
go build -o "$tmp/conch" ./cmd/conch
go build -o "$tmp/patchbench" ./bench/cmd/patchbench
cd "$tmp"
"$tmp/patchbench" -conch "$tmp/conch" "$@"
