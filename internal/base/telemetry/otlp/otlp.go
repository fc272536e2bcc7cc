// Package otlp exports conch's OpenTelemetry traces over OTLP/HTTP when
// the standard OTEL_EXPORTER_OTLP_* variables ask for it; otherwise every
// tracer stays a no-op and nothing is exported. Only the programs' wiring
// (internal/cli) imports it: the SDK and the exporter stay out of the
// engine (internal/testkit/archtest).
package otlp

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// Enabled reports whether the environment asks for traces:
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
// OTEL_SDK_DISABLED is not "true" and OTEL_TRACES_EXPORTER is unset or
// "otlp".
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if x := os.Getenv("OTEL_TRACES_EXPORTER"); x != "" && x != "otlp" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs an OTLP/HTTP trace exporter (configured by the standard
// OTEL_EXPORTER_OTLP_* variables: endpoint, headers, timeout, TLS files;
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the resource) as the
// global tracer provider when [Enabled], and returns the function that
// flushes and stops it. When tracing is off it returns a no-op. Only the
// http/protobuf protocol is spoken: OTEL_EXPORTER_OTLP_PROTOCOL=grpc is an
// error.
func Setup(ctx context.Context, version string) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if !Enabled() {
		return noop, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(k); p != "" {
			if p != "http/protobuf" {
				return noop, fmt.Errorf("%s=%s: conch exports traces over http/protobuf only", k, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName("conch"), semconv.ServiceVersion(version)))
	if err != nil {
		res = resource.Default()
	}
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if m, err := resource.Merge(res, env); err == nil {
			res = m
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp.Shutdown, nil
}
