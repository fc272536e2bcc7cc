package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/conchsh/conch/internal/base/telemetry/otlp"
)

// startTracing installs the OpenTelemetry trace exporter when the
// OTEL_EXPORTER_OTLP_* variables ask for it (docs/operations.md#traces).
// A bad setting is reported on stderr and ok is false. stop flushes the
// spans still buffered (at most 5 s).
func startTracing(cmd string, stderr io.Writer) (stop func(), ok bool) {
	shutdown, err := otlp.Setup(context.Background(), version())
	if err != nil {
		fmt.Fprintf(stderr, "conch %s: tracing: %v\n", cmd, err)
		return func() {}, false
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shutdown(ctx)
	}, true
}
