package proxy

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/paddock-dev/paddock/internal/router/headers"
)

// traceContext is the W3C propagator the router reads from clients and writes to sandboxes. It
// is fixed rather than global, so what goes upstream does not depend on process-wide state.
var traceContext = propagation.TraceContext{}

// startSpan opens the request's server span as a child of the client's traceparent, when
// tracing is on. The attribute names are the upstream router's, so its dashboards carry over.
func (h *Handler) startSpan(r *http.Request) (context.Context, trace.Span) {
	ctx := r.Context()
	if h.cfg.Tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx = traceContext.Extract(ctx, propagation.HeaderCarrier(r.Header))
	return h.cfg.Tracer.Start(ctx, "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("http.method", r.Method),
		attribute.String("http.target", r.URL.Path),
		attribute.String("sandbox.id", r.Header.Get(headers.SandboxID)),
		attribute.String("sandbox.namespace", r.Header.Get(headers.SandboxNamespace)),
	))
}

// endSpan records the outcome; a 5xx, the router's or the sandbox's, marks the span failed.
func endSpan(span trace.Span, code int, st *requestState) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int("http.status_code", code))
	if st.failure != "" {
		span.SetAttributes(attribute.String("paddock.failure", st.failure))
	}
	if code >= http.StatusInternalServerError {
		span.SetStatus(otelcodes.Error, http.StatusText(code))
	}
	span.End()
}

// injectTrace writes the router span's context into the upstream request, replacing the
// client's traceparent, so the sandbox's spans are children of the router's.
func (h *Handler) injectTrace(ctx context.Context, out http.Header) {
	if h.cfg.Tracer != nil {
		traceContext.Inject(ctx, propagation.HeaderCarrier(out))
	}
}
