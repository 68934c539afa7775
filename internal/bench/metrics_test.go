package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sampleMetrics = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="extensions.agents.x-k8s.io",resource="sandboxclaims",scope="resource",subresource="",verb="POST",version="v1beta1"} 40
apiserver_request_total{code="409",component="apiserver",dry_run="",group="extensions.agents.x-k8s.io",resource="sandboxclaims",scope="resource",subresource="",verb="POST",version="v1beta1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="agents.x-k8s.io",resource="sandboxes",scope="resource",subresource="status",verb="PATCH",version="v1beta1"} 81
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PUT",version="v1"} 12
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="DELETE",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="APPLY",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 500
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 70
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 30
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 9
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 99
# HELP apiserver_current_inflight_requests gauge
# TYPE apiserver_current_inflight_requests gauge
apiserver_current_inflight_requests{request_kind="mutating"} 1
`

func TestParseWrites(t *testing.T) {
	got, err := ParseWrites(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	want := Writes{
		"POST sandboxclaims.extensions.agents.x-k8s.io": 42, // summed over response codes
		"PATCH sandboxes.agents.x-k8s.io/status":        81,
		"PUT pods/status":                               12,
		"DELETE pods":                                   3,
		"APPLY configmaps":                              1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseWrites (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(139.0, got.Total()); diff != "" {
		t.Errorf("Total (-want +got):\n%s", diff)
	}
}

func TestParseWritesWithEvents(t *testing.T) {
	got, err := ParseWritesWithEvents(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	want := Writes{
		"POST sandboxclaims.extensions.agents.x-k8s.io": 42,
		"PATCH sandboxes.agents.x-k8s.io/status":        81,
		"PUT pods/status":                               12,
		"DELETE pods":                                   3,
		"APPLY configmaps":                              1,
		"POST events":                                   70, // leases stay out
		"POST events.events.k8s.io":                     30,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseWritesWithEvents (-want +got):\n%s", diff)
	}
}

func TestParseReads(t *testing.T) {
	got, err := ParseReads(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	// WATCH is no read; writes are not either.
	if diff := cmp.Diff(Writes{"LIST pods": 9, "GET pods": 99}, got); diff != "" {
		t.Errorf("ParseReads (-want +got):\n%s", diff)
	}
}

func TestParseWritesErrors(t *testing.T) {
	tests := []struct {
		name, text, wantSubstring string
	}{
		{name: "not metrics text", text: "{\"kind\":\"Status\"} x y", wantSubstring: "parsing API server metrics"},
		{name: "no request counter", text: "# TYPE up gauge\nup 1\n", wantSubstring: "have no apiserver_request_total"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWrites(strings.NewReader(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.wantSubstring) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantSubstring)
			}
		})
	}
}

func TestWritesSub(t *testing.T) {
	before := Writes{"POST a": 10, "PATCH b": 5, "PUT c": 7}
	after := Writes{"POST a": 25, "PATCH b": 5, "PUT c": 2, "DELETE d": 1}
	want := Writes{"POST a": 15, "PUT c": 2, "DELETE d": 1} // c was reset: count from zero
	if diff := cmp.Diff(want, after.Sub(before)); diff != "" {
		t.Errorf("Sub (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"DELETE d", "POST a", "PUT c"}, want.Keys()); diff != "" {
		t.Errorf("Keys (-want +got):\n%s", diff)
	}
}
