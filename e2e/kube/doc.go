//go:build linux

// Package kube holds the end-to-end tests of the Kubernetes sandbox
// backend against a real kube-apiserver on etcd (skipped with the reason
// when kube-apiserver is not built). The harness is internal/testkit/e2etest.
package kube
