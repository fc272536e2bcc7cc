#!/usr/bin/env bash
# The kubernetes backend's bench: the time from an agent's first sandboxed
# exec to its result (pod created and started by a real kubelet with
# containerd and runc where the machine has them (root, apt-get install
# containerd runc containernetworking-plugins busybox-static), else by the
# tests' kubelet stand-in; conch node started and paired through
# TokenReview; no image pull: the image is built on the node), and the `exec true` round trip through a pod's node link
# against a run on the gateway, in one run, against a real kube-apiserver
# and etcd on loopback. Needs etcd (apt-get install etcd-server) and
# kube-apiserver (built and cached by build-apiserver.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
CONCH_KUBE_APISERVER=${CONCH_KUBE_APISERVER:-$(bash bench/k8s/build-apiserver.sh)}
export CONCH_KUBE_APISERVER CONCH_KUBE_BENCH=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
CONCH_KUBE_BENCH_OUT=$out go test ./e2e/kube -run '^TestKubeBench$' -count=1 -timeout 9m >&2
cat "$out"
