package proxy

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
)

func TestOneAccessLogLinePerRequest(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	port := upstream(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	f := newFixture(t, func(c *Config) { c.Log = logger; c.AccessLog = true })
	f.do(t, http.MethodPost, "/files/a", strings.NewReader("x"), map[string]string{"X-Sandbox-ID": "sb",
		"X-Sandbox-Namespace": "team", "X-Sandbox-Port": port, "X-Sandbox-Pod-IP": "127.0.0.1", "User-Agent": "probe/1"})
	f.do(t, http.MethodGet, "/nothing", nil, nil)

	mu.Lock()
	defer mu.Unlock()
	var requests []string
	for _, l := range lines {
		if strings.Contains(l, `"msg"="request"`) {
			requests = append(requests, l)
		}
	}
	if len(requests) != 2 {
		t.Fatalf("got %d access lines, want 2: %q", len(requests), lines)
	}
	for i, want := range [][]string{
		{`"method"="POST"`, `"path"="/files/a"`, `"status"=201`, `"client_ip"="127.0.0.1"`, `"sandbox_id"="sb"`,
			`"sandbox_namespace"="team"`, `"user_agent"="probe/1"`, `"source"="pod-ip"`, `"failure"=""`, `"duration_ms"=`},
		{`"method"="GET"`, `"status"=400`, `"sandbox_id"=""`, `"failure"="bad_headers"`},
	} {
		var missing []string
		for _, field := range want {
			if !strings.Contains(requests[i], field) {
				missing = append(missing, field)
			}
		}
		if diff := cmp.Diff([]string(nil), missing); diff != "" {
			t.Errorf("line %d %q lacks fields (-want +got):\n%s", i, requests[i], diff)
		}
	}
}
