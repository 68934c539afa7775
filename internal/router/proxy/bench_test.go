package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/internal/router/metrics"
	"github.com/paddock-dev/paddock/internal/router/resolve"
)

// benchSetup starts a small upstream and a router in front of it, both on loopback, and returns
// requests for each: direct to the upstream, and through the router by Sandbox lookup.
func benchSetup(b *testing.B) (direct, routed func() *http.Request, client *http.Client) {
	b.Helper()
	payload := []byte(`{"stdout":"hello\n","stderr":"","exit_code":0}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(payload)
	}))
	b.Cleanup(up.Close)
	upPort := up.Listener.Addr().(interface{ String() string }).String()
	_, port := splitPort(upPort)
	sb := sandbox("127.0.0.1", port)
	h := New(Config{
		Resolver:   &resolve.Resolver{Lookup: staticLookup{sb}, Policy: loopback},
		Authorizer: authz.AllowAll{}, Metrics: metrics.New(prometheus.NewRegistry()), Log: logr.Discard(),
		ProxyTimeout: time.Minute, Retry: RetryPolicy{Max: 3, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Transport: NewTransport(loopback, 5*time.Second, 30*time.Second, 0),
	})
	rt := httptest.NewServer(h)
	b.Cleanup(rt.Close)
	client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: false}}
	b.Cleanup(client.CloseIdleConnections)
	direct = func() *http.Request {
		r, _ := http.NewRequest(http.MethodGet, up.URL+"/execute", nil)
		return r
	}
	routed = func() *http.Request {
		r, _ := http.NewRequest(http.MethodGet, rt.URL+"/execute", nil)
		r.Header.Set("X-Sandbox-ID", sb.Name)
		r.Header.Set("X-Sandbox-Namespace", sb.Namespace)
		r.Header.Set("X-Sandbox-Port", port)
		return r
	}
	return direct, routed, client
}

func roundTrip(b *testing.B, c *http.Client, r *http.Request) {
	resp, err := c.Do(r)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkLatency measures one request at a time, directly and through the router; the
// difference of the two ns/op is the latency the router adds on loopback.
func BenchmarkLatency(b *testing.B) {
	direct, routed, client := benchSetup(b)
	for _, bc := range []struct {
		name string
		req  func() *http.Request
	}{{"direct", direct}, {"router", routed}} {
		b.Run(bc.name, func(b *testing.B) {
			roundTrip(b, client, bc.req()) // warm the connections
			b.ResetTimer()
			for b.Loop() {
				roundTrip(b, client, bc.req())
			}
		})
	}
}

// BenchmarkLoad is the bounded load run: run it with a count (-benchtime=20000x) and a time
// bound (-timeout), for example on 2 cores with -cpu=2. It reports requests per second and
// latency percentiles with 8 clients per core, directly and through the router, so the two can
// be compared under the same machine load.
func BenchmarkLoad(b *testing.B) {
	direct, routed, client := benchSetup(b)
	for _, bc := range []struct {
		name string
		req  func() *http.Request
	}{{"direct", direct}, {"router", routed}} {
		b.Run(bc.name, func(b *testing.B) { loadRun(b, client, bc.req) })
	}
}

func loadRun(b *testing.B, client *http.Client, req func() *http.Request) {
	var mu sync.Mutex
	var all []time.Duration
	b.SetParallelism(8)
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			roundTrip(b, client, req())
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		all = append(all, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	pct := func(p float64) float64 { return all[int(p*float64(len(all)-1))].Seconds() * 1e3 }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
