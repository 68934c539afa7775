package manager

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/paddock-dev/paddock/internal/tracing"
)

// NewTracerProvider returns an OTLP/gRPC tracer provider when o.EnableTracing is set, configured
// by the standard OTEL_EXPORTER_OTLP_* variables, and a no-op provider otherwise. It also sets
// the global W3C trace-context propagator. The returned function flushes and stops the exporter.
func NewTracerProvider(ctx context.Context, o *Options) (trace.TracerProvider, func(context.Context) error, error) {
	return tracing.NewProvider(ctx, "paddock-controller", o.EnableTracing)
}
