// Package telemetry is conch's tracer, over the OpenTelemetry API only:
// a no-op until the program installs an exporting provider
// (internal/base/telemetry/otlp, from the CLI wiring), so the engine and what
// runs under it link no exporter, SDK or grpc.
package telemetry

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// Tracer is conch's tracer. It is a no-op until otlp.Setup installs an
// exporting provider.
func Tracer() trace.Tracer { return otel.Tracer("github.com/conchsh/conch") }
