package manager

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracingInitTimeout bounds the exporter's start, as the reference does, so a wrong endpoint
// fails the start instead of hanging it.
const tracingInitTimeout = 10 * time.Second

// NewTracerProvider returns an OTLP/gRPC tracer provider when o.EnableTracing is set, configured
// by the standard OTEL_EXPORTER_OTLP_* variables, and a no-op provider otherwise. It also sets
// the global W3C trace-context propagator. The returned function flushes and stops the exporter.
func NewTracerProvider(ctx context.Context, o *Options) (trace.TracerProvider, func(context.Context) error, error) {
	if !o.EnableTracing {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	initCtx, cancel := context.WithTimeout(ctx, tracingInitTimeout)
	defer cancel()
	exporter, err := otlptracegrpc.New(initCtx)
	if err != nil {
		return nil, nil, fmt.Errorf("--enable-tracing: starting the OTLP exporter (check OTEL_EXPORTER_OTLP_ENDPOINT): %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("paddock-controller"))),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp, tp.Shutdown, nil
}
