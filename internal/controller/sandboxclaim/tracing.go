package sandboxclaim

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// TracerName names the tracer of the controller's spans; the Sandbox controller's is the same.
const TracerName = "paddock-controller"

// traceContext propagates W3C trace context only, through the trace-context annotation.
var traceContext = propagation.TraceContext{}

// startSpan starts the pass's "ReconcileSandboxClaim" span, a child of the trace the claim's
// trace-context annotation names, if any. When tracing is on and the claim names none, the span
// is put in the claim's annotation in memory only: it reaches the Sandbox this pass creates (in
// the create body) or adopts (in the adoption patch), so the Sandbox controller continues the
// claim's trace, and the claim itself costs no extra write.
func (r *Reconciler) startSpan(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) (context.Context, trace.Span) {
	if r.opts.TracerProvider == nil {
		return ctx, noop.Span{} // tracing off: nothing recorded
	}
	carrier := propagation.MapCarrier{}
	if raw := claim.Annotations[agentsv1beta1.TraceContextAnnotation]; raw != "" {
		// A malformed annotation only costs the link to the parent trace.
		_ = json.Unmarshal([]byte(raw), &carrier)
	}
	ctx = traceContext.Extract(ctx, carrier)
	attrs := []attribute.KeyValue{attribute.String("sandboxclaim.name", claim.Name), attribute.String("sandboxclaim.namespace", claim.Namespace)}
	if v, ok := claim.Labels[agentsv1beta1.CreatedByLabel]; ok {
		attrs = append(attrs, attribute.String(agentsv1beta1.CreatedByLabel, NormaliseCreatedBy(v)))
	}
	ctx, span := r.opts.TracerProvider.Tracer(TracerName).Start(ctx, "ReconcileSandboxClaim", trace.WithAttributes(attrs...))
	carryTraceContext(ctx, claim)
	return ctx, span
}

// carryTraceContext sets the claim's trace-context annotation, in memory, to the current span
// when the claim has none.
func carryTraceContext(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) {
	if claim.Annotations[agentsv1beta1.TraceContextAnnotation] != "" {
		return
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return // the provider samples nothing or is a no-op
	}
	raw, _ := json.Marshal(carrier) // a map of strings always encodes
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations[agentsv1beta1.TraceContextAnnotation] = string(raw)
}
