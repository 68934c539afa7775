package tracing

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// A span put in one object's annotation is the parent of a span started from it, as a claim's
// trace continues in its Sandbox's passes.
func TestAnnotationCarriesTheTrace(t *testing.T) {
	tracer := sdktrace.NewTracerProvider().Tracer(ControllerTracerName)
	ctx, claimSpan := tracer.Start(context.Background(), "claim")
	defer claimSpan.End()
	claim := &metav1.ObjectMeta{Name: "c", Annotations: map[string]string{"keep": "me"}}
	if !SetAnnotation(ctx, claim) {
		t.Fatalf("SetAnnotation with a sampled span set nothing")
	}
	if claim.Annotations["keep"] != "me" {
		t.Errorf("SetAnnotation dropped another annotation: %v", claim.Annotations)
	}

	sb := &metav1.ObjectMeta{Name: "sb", Annotations: claim.Annotations}
	_, span := tracer.Start(FromAnnotation(context.Background(), sb), "sandbox")
	defer span.End()
	got, want := span.(sdktrace.ReadOnlySpan).Parent(), claimSpan.SpanContext()
	if got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() {
		t.Errorf("span started from the annotation has parent %s/%s, want %s/%s", got.TraceID(), got.SpanID(), want.TraceID(), want.SpanID())
	}
}

func TestFromAnnotationWithoutATrace(t *testing.T) {
	for name, annotations := range map[string]map[string]string{
		"none":      nil,
		"empty":     {agentsv1beta1.TraceContextAnnotation: ""},
		"malformed": {agentsv1beta1.TraceContextAnnotation: "{not json"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := FromAnnotation(context.Background(), &metav1.ObjectMeta{Annotations: annotations})
			if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
				t.Errorf("a parent %s came from annotations %v", sc.TraceID(), annotations)
			}
		})
	}
}

func TestSetAnnotationWithTracingOff(t *testing.T) {
	ctx, span := noop.NewTracerProvider().Tracer(ControllerTracerName).Start(context.Background(), "off")
	defer span.End()
	obj := &metav1.ObjectMeta{}
	if SetAnnotation(ctx, obj) || obj.Annotations != nil {
		t.Errorf("tracing off, yet SetAnnotation set %v", obj.Annotations)
	}
}

func TestObjectAttributes(t *testing.T) {
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   []attribute.KeyValue
	}{
		{name: "no created-by label", want: []attribute.KeyValue{
			attribute.String("sandbox.name", "sb"), attribute.String("sandbox.namespace", "ns")}},
		{name: "a known client", labels: map[string]string{agentsv1beta1.CreatedByLabel: "go-client"}, want: []attribute.KeyValue{
			attribute.String("sandbox.name", "sb"), attribute.String("sandbox.namespace", "ns"), attribute.String(agentsv1beta1.CreatedByLabel, "go-client")}},
		{name: "anything else is unknown", labels: map[string]string{agentsv1beta1.CreatedByLabel: "my-script"}, want: []attribute.KeyValue{
			attribute.String("sandbox.name", "sb"), attribute.String("sandbox.namespace", "ns"), attribute.String(agentsv1beta1.CreatedByLabel, "unknown")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ObjectAttributes("sandbox", &metav1.ObjectMeta{Name: "sb", Namespace: "ns", Labels: tt.labels})
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(attribute.Value{})); diff != "" {
				t.Errorf("ObjectAttributes (-want +got):\n%s", diff)
			}
		})
	}
}
