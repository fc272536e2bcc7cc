#!/usr/bin/env bash
# Builds kube-apiserver and kubelet from the k8s.io/kubernetes module (through the Go
# module proxy) and caches the binary. The Kubernetes backend's tests run a
# real kube-apiserver (with etcd from Debian) on loopback; no release binary
# is downloadable here, so it is built from source: about 9 minutes on 2
# cores with a warm module cache, a ~170 MB binary, ~1.5 GB of module and
# build cache. Later runs find the cached binary and return at once.
#
# Usage: bench/k8s/build-apiserver.sh        prints the binary's path
# Env:   CONCH_K8S_VERSION (default v1.37.2)
#        CONCH_K8S_CACHE   (default $HOME/.cache/conch-k8s)
# The tests look for $CONCH_KUBE_APISERVER, then the cached binary, then
# kube-apiserver on PATH. The kubelet is cached beside the apiserver.
set -euo pipefail

version=${CONCH_K8S_VERSION:-v1.37.2}
cache=${CONCH_K8S_CACHE:-$HOME/.cache/conch-k8s}
out="$cache/$version/kube-apiserver"
kubelet="$cache/$version/kubelet"
if [ -x "$out" ] && [ -x "$kubelet" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache/$version"
exec 9>"$cache/$version/.lock"
flock 9
if [ -x "$out" ] && [ -x "$kubelet" ]; then # built by a concurrent run while we waited
  echo "$out"
  exit 0
fi

# The staging modules (k8s.io/api, client-go, ...) are published as
# v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>.
staging=v0.${version#v1.}

export GOWORK=off GOFLAGS=-mod=mod
src=$(go mod download -json "k8s.io/kubernetes@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -d "$src" ]; then
  echo "build-apiserver: go mod download k8s.io/kubernetes@$version failed" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/conch-k8s-build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$src" "$work/kubernetes"
chmod -R u+w "$work/kubernetes"
cd "$work/kubernetes"

# Drop the "=> ./staging/..." replaces and require each staging module at
# its published version instead of v0.0.0.
edits=()
while read -r mod; do
  [ -n "$mod" ] || continue
  edits+=("-dropreplace=$mod" "-require=$mod@$staging")
done < <(go mod edit -json | awk '
  /"Replace": \[/ {inrep=1}
  inrep && /"Old":/ {getline; if ($0 ~ /"Path":/) {gsub(/.*"Path": "|",?$/, ""); old=$0}}
  inrep && /"New":/ {getline; if ($0 ~ /"Path": "\.\/staging\//) print old}
')
if [ ${#edits[@]} -eq 0 ]; then
  echo "build-apiserver: found no staging replaces in k8s.io/kubernetes@$version/go.mod" >&2
  exit 1
fi
go mod edit "${edits[@]}"
echo "build-apiserver: building kube-apiserver and kubelet $version ($(( ${#edits[@]} / 2 )) staging modules at $staging); 15 minutes or more on 2 cores" >&2
# One go build for both binaries: they share most packages.
mkdir -p "$work/bin"
go build -trimpath -ldflags=-s -o "$work/bin/" ./cmd/kube-apiserver ./cmd/kubelet
mv "$work/bin/kubelet" "$kubelet"
mv "$work/bin/kube-apiserver" "$out"
echo "$out"
