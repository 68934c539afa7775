package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/metrics"
	"github.com/paddock-dev/paddock/internal/router/resolve"
)

// loopback is the test-only policy: upstreams here run on 127.0.0.1.
var loopback = headers.Policy{AllowLoopback: true}

type fixture struct {
	router  *httptest.Server
	metrics *metrics.Metrics
}

func newFixture(t testing.TB, mutate func(*Config)) *fixture {
	t.Helper()
	m := metrics.New(prometheus.NewRegistry())
	cfg := Config{
		Resolver:     &resolve.Resolver{Lookup: loopbackSandboxes{}, ClusterDomain: "cluster.local", Policy: loopback},
		Authorizer:   authz.AllowAll{},
		Metrics:      m,
		Log:          logr.Discard(),
		ProxyTimeout: time.Minute,
		Transport:    NewTransport(loopback, 5*time.Second, 30*time.Second, 0),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv := httptest.NewServer(New(cfg))
	t.Cleanup(srv.Close)
	return &fixture{router: srv, metrics: m}
}

// upstream starts an HTTP server on 127.0.0.1 and returns its port.
func upstream(t testing.TB, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	declarePort(port)
	return port
}

func (f *fixture) do(t testing.TB, method, path string, body io.Reader, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.router.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func detail(t testing.TB, body string) string {
	t.Helper()
	var d struct{ Detail string }
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatalf("body %q is not the JSON error shape: %v", body, err)
	}
	return d.Detail
}

func TestHeaderErrorsAreJSON(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Resolver.Policy = headers.Policy{} })
	cases := []struct {
		h    map[string]string
		want string
	}{
		{h: nil, want: "X-Sandbox-ID header is required."},
		{h: map[string]string{"X-Sandbox-ID": "Bad"}, want: "Invalid sandbox ID format."},
		{h: map[string]string{"X-Sandbox-ID": "a", "X-Sandbox-Namespace": "B"}, want: "Invalid namespace format."},
		{h: map[string]string{"X-Sandbox-ID": "a", "X-Sandbox-Port": "99999"}, want: "Invalid port format."},
		{h: map[string]string{"X-Sandbox-ID": "a", "X-Sandbox-Pod-IP": "169.254.169.254"}, want: "Invalid target IP address."},
		{h: map[string]string{"X-Sandbox-ID": "a", "X-Sandbox-Pod-IP": "127.0.0.1"}, want: "Invalid target IP address."},
	}
	for _, tc := range cases {
		resp, body := f.do(t, http.MethodGet, "/x", nil, tc.h)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%v: status %d, content type %q", tc.h, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if diff := cmp.Diff(tc.want, detail(t, body)); diff != "" {
			t.Errorf("%v: detail (-want +got):\n%s", tc.h, diff)
		}
	}
	if got := testutil.ToFloat64(f.metrics.Requests.WithLabelValues("GET", "400", metrics.NoNamespace)); got != float64(len(cases)) {
		t.Errorf("requests_total{code=400} = %v, want %d", got, len(cases))
	}
}

func TestForwarding(t *testing.T) {
	var seen http.Header
	var seenURI string
	port := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		seen, seenURI = r.Header.Clone(), r.RequestURI
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "hello")
	})
	f := newFixture(t, nil)
	resp, body := f.do(t, http.MethodGet, "/a%2Fb/c?q=1&r=%20", nil, map[string]string{
		"X-Sandbox-ID": "sb", "X-Sandbox-Port": port, "X-Sandbox-Pod-IP": "127.0.0.1",
		"Authorization": "Bearer secret", "X-Forwarded-For": "198.18.9.9", "Origin": "https://example.test", "X-Custom": "kept",
	})
	if resp.StatusCode != http.StatusTeapot || body != "hello" || resp.Header.Get("X-Upstream") != "yes" {
		t.Fatalf("got %d %q %v", resp.StatusCode, body, resp.Header)
	}
	got := map[string]string{"uri": seenURI, "auth": seen.Get("Authorization"), "xff": seen.Get("X-Forwarded-For"),
		"origin": seen.Get("Origin"), "custom": seen.Get("X-Custom"), "id": seen.Get("X-Sandbox-Id"), "proto": seen.Get("X-Forwarded-Proto")}
	want := map[string]string{"uri": "/a%2Fb/c?q=1&r=%20", "auth": "", "xff": "127.0.0.1",
		"origin": "https://example.test", "custom": "kept", "id": "sb", "proto": "http"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream saw (-want +got):\n%s", diff)
	}
}

func TestUpstreamDownIs502AfterRetries(t *testing.T) {
	// A port that was just free: nothing listens, so every dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	_ = ln.Close()
	declarePort(port)
	f := newFixture(t, func(c *Config) {
		c.Retry = RetryPolicy{Max: 2, InitialDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}
	})
	h := map[string]string{"X-Sandbox-ID": "sb", "X-Sandbox-Port": port, "X-Sandbox-Pod-IP": "127.0.0.1"}

	resp, body := f.do(t, http.MethodGet, "/", nil, h)
	if resp.StatusCode != http.StatusBadGateway || detail(t, body) != "Could not connect to the backend sandbox: sb" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	resp, _ = f.do(t, http.MethodPost, "/", strings.NewReader("x"), h)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("POST got %d", resp.StatusCode)
	}
	if got := testutil.ToFloat64(f.metrics.UpstreamRetries.WithLabelValues(metrics.NoNamespace)); got != 2 {
		t.Errorf("retries = %v, want 2 (GET retried twice, POST never)", got)
	}
	if got := testutil.ToFloat64(f.metrics.UpstreamErrors.WithLabelValues(metrics.NoNamespace, "refused")); got != 2 {
		t.Errorf("upstream_errors{reason=refused} = %v, want 2", got)
	}
}

func TestRetryReachesAnUpstreamThatComesUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	_ = ln.Close()
	declarePort(port)
	var retries atomic.Int32
	srvUp := make(chan struct{})
	f := newFixture(t, nil)
	// Start the upstream from the retry hook, so the first attempt is refused and the next succeeds.
	h := New(Config{
		Resolver: &resolve.Resolver{Lookup: loopbackSandboxes{}, Policy: loopback}, Authorizer: authz.AllowAll{}, Metrics: f.metrics, Log: logr.Discard(),
		ProxyTimeout: time.Minute, Retry: RetryPolicy{Max: 3, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Transport: &hookTransport{base: NewTransport(loopback, 5*time.Second, 5*time.Second, 0), after: func() {
			if retries.Add(1) == 1 {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up") })}
				go func() { _ = srv.Serve(l) }()
				t.Cleanup(func() { _ = srv.Close() })
				close(srvUp)
			}
		}},
	})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("X-Sandbox-ID", "sb")
	req.Header.Set("X-Sandbox-Port", port)
	req.Header.Set("X-Sandbox-Pod-IP", "127.0.0.1")
	h.ServeHTTP(rec, req)
	<-srvUp
	if rec.Code != http.StatusOK || rec.Body.String() != "up" {
		t.Fatalf("got %d %q, want 200 \"up\" after a retry", rec.Code, rec.Body.String())
	}
}

// hookTransport calls after once each round trip has returned, to change the world between attempts.
type hookTransport struct {
	base  http.RoundTripper
	after func()
}

func (h *hookTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.base.RoundTrip(r)
	h.after()
	return resp, err
}

func TestTransportRefusesLoopbackWithoutTestPolicy(t *testing.T) {
	port := upstream(t, func(_ http.ResponseWriter, _ *http.Request) {})
	client := &http.Client{Transport: NewTransport(headers.Policy{}, time.Second, time.Second, 0)}
	// "localhost" stands for any DNS name that resolves to a refused address.
	_, err := client.Get("http://localhost:" + port + "/")
	if !errors.Is(err, errPolicy) {
		t.Fatalf("error = %v, want the policy refusal", err)
	}
	if got := Classify(err); got != "policy" {
		t.Errorf("Classify = %q, want policy", got)
	}
}

func TestBodyLimit(t *testing.T) {
	port := upstream(t, func(_ http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Log(err)
		}
	})
	f := newFixture(t, func(c *Config) { c.MaxRequestBodyBytes = 10 })
	h := map[string]string{"X-Sandbox-ID": "sb", "X-Sandbox-Port": port, "X-Sandbox-Pod-IP": "127.0.0.1"}
	if resp, _ := f.do(t, http.MethodPut, "/", strings.NewReader("0123456789"), h); resp.StatusCode != http.StatusOK {
		t.Errorf("body at the limit: %d", resp.StatusCode)
	}
	resp, body := f.do(t, http.MethodPut, "/", strings.NewReader("0123456789A"), h)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || detail(t, body) != "Request body exceeds the router limit of 10 bytes." {
		t.Errorf("declared body over the limit: %d %q", resp.StatusCode, body)
	}
	// A chunked body has no length to check up front; the reader stops it.
	resp, body = f.do(t, http.MethodPut, "/", io.MultiReader(strings.NewReader("0123456789"), strings.NewReader("ABCDEFGH")), h)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked body over the limit: %d %q", resp.StatusCode, body)
	}
}

func TestClientTimeoutHeader(t *testing.T) {
	release := make(chan struct{})
	port := upstream(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	f := newFixture(t, nil)
	resp, body := f.do(t, http.MethodGet, "/", nil, map[string]string{"X-Sandbox-ID": "sb", "X-Sandbox-Port": port,
		"X-Sandbox-Pod-IP": "127.0.0.1", "X-Sandbox-Timeout": "0.05"})
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("got %d %q, want 502 once the client's timeout passed", resp.StatusCode, body)
	}
	if got := testutil.ToFloat64(f.metrics.UpstreamErrors.WithLabelValues(metrics.NoNamespace, "timeout")); got != 1 {
		t.Errorf("upstream_errors{reason=timeout} = %v, want 1", got)
	}
}

func TestAuthzDenialShape(t *testing.T) {
	deny := authorizerFunc(func(context.Context, *http.Request, headers.Target) error {
		return fmt.Errorf("%w: no token", authz.ErrUnauthenticated)
	})
	broken := authorizerFunc(func(context.Context, *http.Request, headers.Target) error { return errors.New("apiserver down") })
	for _, tc := range []struct {
		a          authz.Authorizer
		wantStatus int
		wantDetail string
	}{
		{a: deny, wantStatus: 401, wantDetail: "unauthenticated: no token"},
		{a: broken, wantStatus: 500, wantDetail: "Authorization could not be decided; retry shortly."},
	} {
		f := newFixture(t, func(c *Config) { c.Authorizer = tc.a })
		resp, body := f.do(t, http.MethodGet, "/", nil, map[string]string{"X-Sandbox-ID": "sb"})
		if resp.StatusCode != tc.wantStatus || detail(t, body) != tc.wantDetail {
			t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tc.wantStatus, tc.wantDetail)
		}
	}
}

type authorizerFunc func(context.Context, *http.Request, headers.Target) error

func (f authorizerFunc) Authorize(ctx context.Context, r *http.Request, t headers.Target) error {
	return f(ctx, r, t)
}

func TestRetriable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("reset")}
	for _, tc := range []struct {
		method string
		body   io.ReadCloser
		err    error
		want   bool
	}{
		{http.MethodGet, nil, dial, true},
		{http.MethodDelete, http.NoBody, dial, true},
		{http.MethodGet, nil, read, false},
		{http.MethodPost, nil, dial, false},
		{http.MethodPatch, nil, dial, false},
		{http.MethodPut, io.NopCloser(strings.NewReader("x")), dial, false},
		{http.MethodGet, nil, fmt.Errorf("wrapped: %w", errPolicy), false},
		{http.MethodGet, nil, &net.DNSError{Err: "no such host", IsNotFound: true}, false},
		{http.MethodGet, nil, &net.DNSError{Err: "server misbehaving", IsTemporary: true}, true},
	} {
		req := &http.Request{Method: tc.method, Body: tc.body}
		if got := Retriable(req, tc.err); got != tc.want {
			t.Errorf("Retriable(%s, body=%v, %v) = %v, want %v", tc.method, tc.body != nil, tc.err, got, tc.want)
		}
	}
}

// TestStreamsAreFullDuplex: the upstream starts its answer before it reads the request body,
// and the client sends the body only once it has the answer's headers, as a bidirectional stream
// does. Without full duplex the router's HTTP/1 server would consume and close the body at the
// first response write (here: wait for a body the client holds back, a deadlock), and in the
// ordinary case close it under the transport, which then cuts the upstream stream.
func TestStreamsAreFullDuplex(t *testing.T) {
	port := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		line, err := bufio.NewReader(r.Body).ReadString('\n')
		if err != nil {
			t.Errorf("upstream reading the body after its headers: %v", err)
		}
		_, _ = io.WriteString(w, "echo "+line)
	})
	f := newFixture(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds a deadlock
	defer cancel()
	body, send := io.Pipe()
	// The client's transport returns only once the body it is sending ends: end it with the wait.
	stop := context.AfterFunc(ctx, func() { _ = send.CloseWithError(ctx.Err()) })
	defer stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.router.URL+"/stream", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Sandbox-ID", "sb")
	req.Header.Set("X-Sandbox-Port", port)
	req.Header.Set("X-Sandbox-Pod-IP", "127.0.0.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no response headers before the body was sent: %v", err)
	}
	defer resp.Body.Close()
	if _, err := io.WriteString(send, "ping\n"); err != nil {
		t.Fatal(err)
	}
	_ = send.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != "echo ping\n" {
		t.Errorf("streamed answer %q, %v; want %q", got, err, "echo ping\n")
	}
}
