package tracing

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/podmeta"
)

// ControllerTracerName names the tracer of the controllers' spans.
const ControllerTracerName = "paddock-controller"

// traceContext propagates W3C trace context only, through the trace-context annotation.
var traceContext = propagation.TraceContext{}

// FromAnnotation returns ctx carrying, as its remote parent, the trace that obj's trace-context
// annotation names; ctx unchanged when it names none. A controller's pass then continues the
// trace of whoever made or claimed the object.
func FromAnnotation(ctx context.Context, obj metav1.Object) context.Context {
	carrier := propagation.MapCarrier{}
	if raw := obj.GetAnnotations()[agentsv1beta1.TraceContextAnnotation]; raw != "" {
		// A malformed annotation only costs the link to the parent trace.
		_ = json.Unmarshal([]byte(raw), &carrier)
	}
	return traceContext.Extract(ctx, carrier)
}

// SetAnnotation puts ctx's span in obj's trace-context annotation, in memory, and reports whether
// it did: not when tracing is off or the span is not sampled. The caller sends it with its next
// write and decides when an annotation already there is kept.
func SetAnnotation(ctx context.Context, obj metav1.Object) bool {
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return false
	}
	raw, _ := json.Marshal(carrier) // a map of strings always encodes
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[agentsv1beta1.TraceContextAnnotation] = string(raw)
	obj.SetAnnotations(annotations)
	return true
}

// ObjectAttributes are the span attributes naming obj: "<kind>.name", "<kind>.namespace" and,
// when labelled, its created-by client bounded as on Pods (podmeta.NormalizeCreatedBy).
func ObjectAttributes(kind string, obj metav1.Object) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String(kind+".name", obj.GetName()), attribute.String(kind+".namespace", obj.GetNamespace())}
	if v, ok := obj.GetLabels()[agentsv1beta1.CreatedByLabel]; ok {
		attrs = append(attrs, attribute.String(agentsv1beta1.CreatedByLabel, podmeta.NormalizeCreatedBy(v)))
	}
	return attrs
}
