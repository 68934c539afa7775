package proxy

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The client's trace: a W3C traceparent with a known trace id and parent span id.
const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
)

func TestTracingSpanPerRequestPropagatedUpstream(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	var upstreamParent string
	port := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		upstreamParent = r.Header.Get("Traceparent")
		w.WriteHeader(http.StatusAccepted)
	})
	f := newFixture(t, func(c *Config) { c.Tracer = tp.Tracer("test") })
	resp, _ := f.do(t, http.MethodPost, "/v1/processes", nil, map[string]string{
		"X-Sandbox-ID": "sb", "X-Sandbox-Namespace": "team", "X-Sandbox-Port": port, "X-Sandbox-Pod-IP": "127.0.0.1",
		"Traceparent": "00-" + clientTraceID + "-" + clientSpanID + "-01",
	})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202 from the upstream", resp.StatusCode)
	}
	spans := exporter.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want one per request", len(spans))
	}
	s := spans[0]
	got := map[string]any{
		"name": s.Name, "kind": s.SpanKind, "trace": s.SpanContext.TraceID().String(), "parent": s.Parent.SpanID().String(),
		"remote parent": s.Parent.IsRemote(), "status": s.Status.Code, "attributes": attributeMap(s.Attributes),
		"upstream traceparent": upstreamParent,
	}
	want := map[string]any{
		"name": "HTTP POST", "kind": trace.SpanKindServer, "trace": clientTraceID, "parent": clientSpanID,
		"remote parent": true, "status": otelcodes.Unset, "attributes": map[string]string{
			"http.method": "POST", "http.target": "/v1/processes", "sandbox.id": "sb", "sandbox.namespace": "team", "http.status_code": "202",
		},
		// The sandbox's parent is the router's span, in the client's trace.
		"upstream traceparent": "00-" + clientTraceID + "-" + s.SpanContext.SpanID().String() + "-01",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("span and upstream traceparent (-want +got):\n%s", diff)
	}
}

func TestTracingMarksRouterErrors(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	f := newFixture(t, func(c *Config) { c.Tracer = tp.Tracer("test") })
	declarePort("1")
	// Port 1 on loopback: nothing listens, so the upstream dial fails with 502.
	resp, _ := f.do(t, http.MethodGet, "/", nil, map[string]string{"X-Sandbox-ID": "sb", "X-Sandbox-Port": "1", "X-Sandbox-Pod-IP": "127.0.0.1"})
	spans := exporter.GetSpans()
	if resp.StatusCode != http.StatusBadGateway || len(spans) != 1 {
		t.Fatalf("status %d with %d spans, want 502 and one span", resp.StatusCode, len(spans))
	}
	attrs := attributeMap(spans[0].Attributes)
	got := []string{spans[0].Status.Code.String(), attrs["http.status_code"], attrs["paddock.failure"]}
	if diff := cmp.Diff([]string{"Error", "502", "upstream_refused"}, got); diff != "" {
		t.Errorf("span status, status code, failure (-want +got):\n%s", diff)
	}
}

func TestNoTracerLeavesTraceparentAlone(t *testing.T) {
	var upstreamParent string
	port := upstream(t, func(_ http.ResponseWriter, r *http.Request) { upstreamParent = r.Header.Get("Traceparent") })
	f := newFixture(t, nil)
	in := "00-" + clientTraceID + "-" + clientSpanID + "-01"
	f.do(t, http.MethodGet, "/", nil, map[string]string{"X-Sandbox-ID": "sb", "X-Sandbox-Port": port, "X-Sandbox-Pod-IP": "127.0.0.1", "Traceparent": in})
	if upstreamParent != in {
		t.Errorf("upstream traceparent = %q, want the client's %q passed through", upstreamParent, in)
	}
}

func attributeMap(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func TestAccessLogCarriesTheTrace(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	port := upstream(t, func(http.ResponseWriter, *http.Request) {})
	f := newFixture(t, func(c *Config) { c.Log, c.AccessLog, c.Tracer = logger, true, tp.Tracer("test") })
	f.do(t, http.MethodGet, "/", nil, map[string]string{"X-Sandbox-ID": "sb", "X-Sandbox-Port": port, "X-Sandbox-Pod-IP": "127.0.0.1",
		"Traceparent": "00-" + clientTraceID + "-" + clientSpanID + "-01"})
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		if strings.Contains(l, `"msg"="request"`) {
			if !strings.Contains(l, `"trace_id"="`+clientTraceID+`"`) || !strings.Contains(l, `"span_id"="`) {
				t.Errorf("access line %q lacks the client's trace id and the router's span id", l)
			}
			return
		}
	}
	t.Fatalf("no access line among %q", lines)
}
