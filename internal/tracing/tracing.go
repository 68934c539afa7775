// Package tracing starts the OpenTelemetry tracer provider every Paddock binary uses: OTLP over
// gRPC, configured by the standard OTEL_EXPORTER_OTLP_* variables, with W3C trace context as
// the propagator.
package tracing

import (
	"context"
	"fmt"
	"os"
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

// initTimeout bounds the exporter's start, so a wrong endpoint fails the start instead of
// hanging it.
const initTimeout = 10 * time.Second

// NewProvider returns an OTLP/gRPC tracer provider for service when enabled, and a no-op
// provider otherwise. When enabled it also installs the provider and the W3C trace-context
// propagator globally. The returned function flushes and stops the exporter.
func NewProvider(ctx context.Context, service string, enabled bool) (trace.TracerProvider, func(context.Context) error, error) {
	if !enabled {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	initCtx, cancel := context.WithTimeout(ctx, initTimeout)
	defer cancel()
	exporter, err := otlptracegrpc.New(initCtx)
	if err != nil {
		return nil, nil, fmt.Errorf("--enable-tracing: starting the OTLP exporter (check OTEL_EXPORTER_OTLP_ENDPOINT): %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(service))),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp, tp.Shutdown, nil
}

// EndpointConfigured reports whether the environment names an OTLP traces endpoint, which turns
// tracing on when --enable-tracing is not given explicitly.
func EndpointConfigured() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}
