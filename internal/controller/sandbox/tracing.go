package sandbox

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/tracing"
)

func defaultTracer() trace.Tracer {
	return noop.NewTracerProvider().Tracer(tracing.ControllerTracerName)
}

// startSpan starts the pass's span under the trace the Sandbox carries, if any.
func (r *Reconciler) startSpan(ctx context.Context, sb *agentsv1beta1.Sandbox) (context.Context, trace.Span) {
	ctx = tracing.FromAnnotation(ctx, sb)
	return r.tracer.Start(ctx, "ReconcileSandbox", trace.WithAttributes(tracing.ObjectAttributes("sandbox", sb)...))
}

// recordTraceContext puts the current trace in the Sandbox's annotation when it has none (an
// empty one, too, is kept), so later passes and other controllers join the same trace. The
// change is sent with the pass's one metadata patch.
func recordTraceContext(ctx context.Context, sb *agentsv1beta1.Sandbox) {
	if _, ok := sb.Annotations[agentsv1beta1.TraceContextAnnotation]; !ok {
		tracing.SetAnnotation(ctx, sb)
	}
}

// endSpan ends a pass's span, marking it failed when the pass returns an error.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
