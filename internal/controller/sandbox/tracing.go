package sandbox

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/podmeta"
)

// TracerName names the tracer of the controller's spans.
const TracerName = "paddock-controller"

// traceContext propagates W3C trace context only, through the trace-context annotation.
var traceContext = propagation.TraceContext{}

func defaultTracer() trace.Tracer { return noop.NewTracerProvider().Tracer(TracerName) }

// startSpan starts the pass's span under the trace the Sandbox carries, if any.
func (r *Reconciler) startSpan(ctx context.Context, sb *agentsv1beta1.Sandbox) (context.Context, trace.Span) {
	carrier := propagation.MapCarrier{}
	if raw := sb.Annotations[agentsv1beta1.TraceContextAnnotation]; raw != "" {
		// A malformed annotation only costs the link to the parent trace.
		_ = json.Unmarshal([]byte(raw), &carrier)
	}
	ctx = traceContext.Extract(ctx, carrier)
	attrs := []attribute.KeyValue{attribute.String("sandbox.name", sb.Name), attribute.String("sandbox.namespace", sb.Namespace)}
	if v, ok := sb.Labels[agentsv1beta1.CreatedByLabel]; ok {
		attrs = append(attrs, attribute.String(agentsv1beta1.CreatedByLabel, podmeta.NormalizeCreatedBy(v)))
	}
	return r.tracer.Start(ctx, "ReconcileSandbox", trace.WithAttributes(attrs...))
}

// recordTraceContext puts the current trace in the Sandbox's annotation when it has none, so
// later passes and other controllers join the same trace. The change is sent with the pass's one
// metadata patch.
func recordTraceContext(ctx context.Context, sb *agentsv1beta1.Sandbox) {
	if _, ok := sb.Annotations[agentsv1beta1.TraceContextAnnotation]; ok {
		return
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return // tracing is off
	}
	raw, _ := json.Marshal(carrier) // a map of strings always encodes
	if sb.Annotations == nil {
		sb.Annotations = map[string]string{}
	}
	sb.Annotations[agentsv1beta1.TraceContextAnnotation] = string(raw)
}

// endSpan ends a pass's span, marking it failed when the pass returns an error.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
