package archtest

import (
	"strings"
	"testing"
)

// Heavy libraries enter through one door each, so that what does not need
// them (the engine, the supervisor, conch-shim) does not pay their start-up.

// TestClientGoOnlyInKube: client-go and the Kubernetes API packages are
// imported by internal/host/kube only, and internal/host/kube by the programs'
// wiring (internal/cli) only.
func TestClientGoOnlyInKube(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, imp := range p.Imports {
			k8s := strings.HasPrefix(imp, "k8s.io/") || strings.HasPrefix(imp, "sigs.k8s.io/")
			if k8s && p.ImportPath != mod+"/internal/host/kube" && !strings.HasPrefix(p.ImportPath, mod+"/bench/") {
				t.Errorf("%s imports %s: Kubernetes client code belongs in internal/host/kube", p.ImportPath, imp)
			}
			if imp == mod+"/internal/host/kube" && p.ImportPath != mod+"/internal/cli" && !strings.HasPrefix(p.ImportPath, mod+"/bench/") {
				t.Errorf("%s imports internal/host/kube: only the CLI wiring (internal/cli) does", p.ImportPath)
			}
		}
	}
}

// TestEngineTracesThroughTheAPI: the engine and everything below it use
// the OpenTelemetry API only; the SDK, the exporters and grpc come in with
// internal/base/telemetry/otlp, which only the CLI wiring imports.
func TestEngineTracesThroughTheAPI(t *testing.T) {
	heavy := []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "google.golang.org/grpc", mod + "/internal/base/telemetry/otlp"}
	for _, p := range listPackages(t) {
		if p.ImportPath != mod+"/engine" && !strings.HasPrefix(p.ImportPath, mod+"/internal/host") {
			continue
		}
		for _, d := range p.Deps {
			for _, h := range heavy {
				if d == h || strings.HasPrefix(d, h+"/") {
					t.Errorf("%s depends on %s: install exporters in the CLI wiring (internal/cli)", p.ImportPath, d)
				}
			}
		}
	}
	for _, p := range listPackages(t) {
		for _, imp := range p.Imports {
			if imp == mod+"/internal/base/telemetry/otlp" && p.ImportPath != mod+"/internal/cli" {
				t.Errorf("%s imports internal/base/telemetry/otlp: only internal/cli installs the exporter", p.ImportPath)
			}
		}
	}
}
