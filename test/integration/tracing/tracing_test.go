// Package tracing proves that a claim's trace reaches its Sandbox: with every controller running
// as main runs them and a real OpenTelemetry SDK exporting to memory, the Sandbox controller's
// spans of a claimed Sandbox belong to the claim's trace, for cold and warm claims alike.
package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

var (
	env      *framework.Env
	exporter = tracetest.NewInMemoryExporter()
)

func TestMain(m *testing.M) { framework.RunMain(m, &env, startTracedControllers) }

// startTracedControllers runs every controller in one manager, as main does with
// --enable-tracing, but exporting spans synchronously to memory instead of over OTLP.
func startTracedControllers(e *framework.Env) (func(), error) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	stop, err := framework.StartControllersWith(e, func(o *manager.Options) { o.EnableTracing = true }, tp)
	if err != nil {
		return nil, err
	}
	return func() {
		stop()
		_ = tp.Shutdown(context.Background())
	}, nil
}

// spans returns the ended spans named name whose attribute key has value.
func spans(name, key, value string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exporter.GetSpans() {
		if s.Name != name {
			continue
		}
		for _, a := range s.Attributes {
			if string(a.Key) == key && a.Value.AsString() == value {
				out = append(out, s)
			}
		}
	}
	return out
}

// traceOfAnnotation returns the trace ID the trace-context annotation of obj names.
func traceOfAnnotation(annotations map[string]string) (trace.TraceID, error) {
	raw := annotations[agentsv1beta1.TraceContextAnnotation]
	if raw == "" {
		return trace.TraceID{}, fmt.Errorf("no %s annotation", agentsv1beta1.TraceContextAnnotation)
	}
	var carrier map[string]string
	if err := json.Unmarshal([]byte(raw), &carrier); err != nil {
		return trace.TraceID{}, fmt.Errorf("annotation %q: %w", raw, err)
	}
	// traceparent is version-traceid-spanid-flags.
	var version, traceID, spanID, flags string
	if _, err := fmt.Sscanf(replaceDashes(carrier["traceparent"]), "%s %s %s %s", &version, &traceID, &spanID, &flags); err != nil {
		return trace.TraceID{}, fmt.Errorf("traceparent %q: %w", carrier["traceparent"], err)
	}
	return trace.TraceIDFromHex(traceID)
}

func replaceDashes(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '-' {
			b[i] = ' '
		}
	}
	return string(b)
}

// sandboxJoinsClaimTrace waits until the Sandbox named sbName carries a trace-context annotation
// and the Sandbox controller has ended a span of it in the same trace as one of the claim's spans.
// It returns that trace.
func sandboxJoinsClaimTrace(t *testing.T, ns, claimName, sbName string) trace.TraceID {
	t.Helper()
	var joined trace.TraceID
	framework.Eventually(t, func(ctx context.Context) error {
		sb := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sbName}, sb); err != nil {
			return err
		}
		annotated, err := traceOfAnnotation(sb.Annotations)
		if err != nil {
			return fmt.Errorf("Sandbox %s: %w", sbName, err)
		}
		claimTraces := map[trace.TraceID]bool{}
		for _, s := range spans("ReconcileSandboxClaim", "sandboxclaim.name", claimName) {
			claimTraces[s.SpanContext.TraceID()] = true
		}
		if !claimTraces[annotated] {
			return fmt.Errorf("Sandbox %s's annotation names trace %s, which no ReconcileSandboxClaim span of claim %s has (it has %d traces)",
				sbName, annotated, claimName, len(claimTraces))
		}
		for _, s := range spans("ReconcileSandbox", "sandbox.name", sbName) {
			if s.SpanContext.TraceID() == annotated {
				joined = annotated
				return nil
			}
		}
		return fmt.Errorf("no ReconcileSandbox span of %s is in the claim's trace %s yet", sbName, annotated)
	})
	return joined
}

// TestColdClaimTraceReachesSandbox claims from a pool with no members: the Sandbox is created
// with the claim's trace in its create body, and the Sandbox controller continues that trace.
// The claim itself gets no annotation: carrying the trace costs no write.
func TestColdClaimTraceReachesSandbox(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	ns := env.Namespace(t)
	env.PlayKubelet(t, ns)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("cold", ns, "tpl").Replicas(0).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("c1", ns, "cold").Obj())

	sandboxJoinsClaimTrace(t, ns, "c1", "c1")
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1"}, claim); err != nil {
		t.Fatal(err)
	}
	if v, ok := claim.Annotations[agentsv1beta1.TraceContextAnnotation]; ok {
		t.Errorf("the claim was written a trace-context annotation %q; carrying the trace must cost no claim write", v)
	}
}

// TestWarmClaimTraceReachesSandbox claims a ready pool member: the adoption patch carries the
// claim's trace over the member's own, and the Sandbox controller's later passes join it.
func TestWarmClaimTraceReachesSandbox(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	ns := env.Namespace(t)
	env.PlayKubelet(t, ns)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("warm", ns, "tpl").Replicas(1).Obj())
	var member agentsv1beta1.Sandbox
	framework.Eventually(t, func(ctx context.Context) error {
		pool := &extensionsv1beta1.SandboxWarmPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "warm"}, pool); err != nil {
			return err
		}
		if pool.Status.ReadyReplicas != 1 {
			return fmt.Errorf("pool has %d ready members, want 1", pool.Status.ReadyReplicas)
		}
		var list agentsv1beta1.SandboxList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("namespace holds %d Sandboxes, want the 1 member", len(list.Items))
		}
		member = list.Items[0]
		return nil
	})
	memberTrace, err := traceOfAnnotation(member.Annotations)
	if err != nil {
		t.Fatalf("pool member %s: %v (the Sandbox controller records a trace for Sandboxes without one)", member.Name, err)
	}

	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("w1", ns, "warm").Obj())
	joined := sandboxJoinsClaimTrace(t, ns, "w1", member.Name)
	if joined == memberTrace {
		t.Errorf("the adopted Sandbox kept the pool member's own trace %s instead of the claim's", memberTrace)
	}
}

// TestClaimContinuesCallersTrace gives the claim a trace-context annotation, as a client that
// traces its request does: the claim's spans and the Sandbox's join the caller's trace.
func TestClaimContinuesCallersTrace(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	ns := env.Namespace(t)
	env.PlayKubelet(t, ns)
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceparent := fmt.Sprintf(`{"traceparent":"00-%s-00f067aa0ba902b7-01"}`, callerTrace)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("cold", ns, "tpl").Replicas(0).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("traced", ns, "cold").
		Annotation(agentsv1beta1.TraceContextAnnotation, traceparent).Obj())

	joined := sandboxJoinsClaimTrace(t, ns, "traced", "traced")
	if joined.String() != callerTrace {
		t.Errorf("the claim's Sandbox joined trace %s, want the caller's %s", joined, callerTrace)
	}
}
