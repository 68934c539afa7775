package sandboxclaim

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/tracing"
)

// startSpan starts the pass's "ReconcileSandboxClaim" span, a child of the trace the claim's
// trace-context annotation names, if any. When tracing is on and the claim names none, the span
// is put in the claim's annotation in memory only: it reaches the Sandbox this pass creates (in
// the create body) or adopts (in the adoption patch), so the Sandbox controller continues the
// claim's trace, and the claim itself costs no extra write.
func (r *Reconciler) startSpan(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) (context.Context, trace.Span) {
	if r.opts.TracerProvider == nil {
		return ctx, noop.Span{} // tracing off: nothing recorded
	}
	ctx = tracing.FromAnnotation(ctx, claim)
	ctx, span := r.opts.TracerProvider.Tracer(tracing.ControllerTracerName).Start(ctx, "ReconcileSandboxClaim",
		trace.WithAttributes(tracing.ObjectAttributes("sandboxclaim", claim)...))
	if claim.Annotations[agentsv1beta1.TraceContextAnnotation] == "" {
		tracing.SetAnnotation(ctx, claim)
	}
	return ctx, span
}
