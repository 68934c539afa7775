package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// spansOf returns the trace IDs and parent span IDs of the ReconcileSandbox spans of sb.
func spansOf(sb *agentsv1beta1.Sandbox) (traces, parents map[string]bool) {
	traces, parents = map[string]bool{}, map[string]bool{}
	for _, s := range spans.GetSpans() {
		if s.Name != "ReconcileSandbox" {
			continue
		}
		attrs := attribute.NewSet(s.Attributes...)
		name, _ := attrs.Value("sandbox.name")
		ns, _ := attrs.Value("sandbox.namespace")
		if name.AsString() == sb.Name && ns.AsString() == sb.Namespace {
			traces[s.SpanContext.TraceID().String()] = true
			parents[s.Parent.SpanID().String()] = true
		}
	}
	return traces, parents
}

// A Sandbox without trace context gets its first pass's trace recorded; later passes join it.
func TestTraceContextIsRecorded(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("traced", ns).Obj()
	create(t, ctx, sb)
	got := waitSandbox(t, sb, func(s *agentsv1beta1.Sandbox) error {
		if s.Annotations[agentsv1beta1.TraceContextAnnotation] == "" {
			return fmt.Errorf("no trace context annotation")
		}
		return nil
	})
	var carrier map[string]string
	if err := json.Unmarshal([]byte(got.Annotations[agentsv1beta1.TraceContextAnnotation]), &carrier); err != nil {
		t.Fatalf("trace context annotation is not a JSON map: %v", err)
	}
	traceID := traceIDOf(t, carrier["traceparent"])
	nextCompletedPass(t, ctx, sb)
	framework.Eventually(t, func(context.Context) error {
		traces, _ := spansOf(sb)
		if len(traces) != 1 || !traces[traceID] {
			return fmt.Errorf("passes ran in traces %v, want only %s", traces, traceID)
		}
		return nil
	})
}

// A Sandbox that carries a trace (from the claim that made it) is reconciled in that trace, and
// its annotation is left alone.
func TestTraceContextIsFollowed(t *testing.T) {
	ctx, ns := start(t)
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	annotation := `{"traceparent":"` + parent + `"}`
	sb := builder.MakeSandbox("child", ns).Annotation(agentsv1beta1.TraceContextAnnotation, annotation).Obj()
	create(t, ctx, sb)
	waitPod(t, key(sb), nil)
	framework.Eventually(t, func(context.Context) error {
		traces, parents := spansOf(sb)
		if len(traces) != 1 || !traces["0af7651916cd43dd8448eb211c80319c"] || !parents["b7ad6b7169203331"] {
			return fmt.Errorf("spans in traces %v with parents %v, want the annotated trace", traces, parents)
		}
		return nil
	})
	if got := waitSandbox(t, sb, func(*agentsv1beta1.Sandbox) error { return nil }); got.Annotations[agentsv1beta1.TraceContextAnnotation] != annotation {
		t.Errorf("trace context annotation rewritten to %q", got.Annotations[agentsv1beta1.TraceContextAnnotation])
	}
}

func traceIDOf(t *testing.T, traceparent string) string {
	t.Helper()
	// version (2 hex) - trace ID (32) - parent span ID (16) - flags (2)
	if len(traceparent) != 55 || traceparent[2] != '-' || traceparent[35] != '-' {
		t.Fatalf("traceparent %q is not version-trace-span-flags", traceparent)
	}
	return traceparent[3:35]
}
