package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

func opts() Options {
	return Options{HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", HealthAddr: "127.0.0.1:0",
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 4096,
		ShutdownTimeout: 10 * time.Second, Gatherer: prometheus.NewRegistry(), Log: logr.Discard()}
}

func get(t *testing.T, url string, h http.Header) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestEndpoints(t *testing.T) {
	proxied := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "proxied "+r.URL.Path) })
	var ready atomic.Bool
	o := opts()
	o.Ready = ready.Load
	s := New(o, proxied)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	proxy, health, metrics := "http://"+s.Addr(ProxyHTTP), "http://"+s.Addr(Health), "http://"+s.Addr(Metrics)

	type answer struct {
		Code        int
		ContentType string
		Body        string
	}
	ask := func(url string, h http.Header) answer {
		code, ct, body := get(t, url, h)
		return answer{code, ct, body}
	}
	cases := []struct {
		name string
		url  string
		h    http.Header
		want answer
	}{
		{"healthz on proxy port", proxy + "/healthz", nil, answer{200, "application/json", `{"status":"ok"}`}},
		{"healthz on probe port", health + "/healthz", nil, answer{200, "application/json", `{"status":"ok"}`}},
		{"readyz waits for the extra check", health + "/readyz", nil, answer{503, "text/plain; charset=utf-8", "not ready\n"}},
		{"readyz on proxy port is proxied", proxy + "/readyz", nil, answer{200, "text/plain; charset=utf-8", "proxied /readyz"}},
		{"headers over the limit", proxy + "/x", http.Header{"X-Big": {strings.Repeat("a", 16<<10)}}, answer{431, "text/plain; charset=utf-8", "431 Request Header Fields Too Large"}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, ask(tc.url, tc.h)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	ready.Store(true)
	if diff := cmp.Diff(answer{200, "text/plain; charset=utf-8", "ok"}, ask(health+"/readyz", nil)); diff != "" {
		t.Errorf("readyz when ready (-want +got):\n%s", diff)
	}
	if code, ct, _ := get(t, metrics+"/metrics", nil); code != 200 || !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("metrics: %d %q", code, ct)
	}
}

func TestListenIsAllOrNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	o := opts()
	o.HealthAddr = taken.Addr().String()
	s := New(o, http.NotFoundHandler())
	err = s.Listen()
	if err == nil || !strings.Contains(err.Error(), "binding health listener") {
		t.Fatalf("Listen error = %v, want a health bind failure", err)
	}
	for _, name := range []string{ProxyHTTP, Metrics, Health} {
		if addr := s.Addr(name); addr != "" {
			t.Errorf("%s still bound at %s after a failed Listen", name, addr)
		}
	}
}

func TestHTTPSNeedsTLSConfig(t *testing.T) {
	o := opts()
	o.HTTPSAddr = "127.0.0.1:0"
	if err := New(o, http.NotFoundHandler()).Listen(); err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Fatalf("Listen error = %v, want one naming the TLS flags", err)
	}
}
