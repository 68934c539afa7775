package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/client-go/rest"

	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/proxy"
	"github.com/paddock-dev/paddock/internal/router/server"
)

// RouterConfig is the router main builds, with loopback addresses, a short retry and the
// loopback address policy (sandboxes of these tests listen on 127.0.0.0/8), in allow-all mode:
// tests that check access set AuthzMode.
func RouterConfig(t *testing.T, kube *rest.Config) router.Config {
	return router.Config{
		Server: server.Options{HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", HealthAddr: "127.0.0.1:0",
			ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10,
			ShutdownTimeout: 30 * time.Second},
		Kube: kube, SandboxCache: true, ClusterDomain: "cluster.local",
		AuthzMode: router.AuthzAllowAll, ProxyTimeout: time.Minute, DialTimeout: 5 * time.Second,
		ResponseTimeout: 30 * time.Second, AccessLog: true,
		Retry:  proxy.RetryPolicy{Max: 1, InitialDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond},
		Log:    testr.NewWithOptions(t, testr.Options{Verbosity: 0}),
		Policy: headers.Policy{AllowLoopback: true},
	}
}

// ServeRouter builds and serves a router from cfg until the test ends (or stop is called) and
// waits until /readyz passes: listeners bound, Sandbox cache synced.
func ServeRouter(t testing.TB, cfg router.Config) (r *router.Router, stop func() error) {
	t.Helper()
	r, err := router.New(cfg)
	if err != nil {
		t.Fatalf("building router: %v", err)
	}
	if err := r.Listen(); err != nil {
		t.Fatalf("binding router: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	stopped := false
	var stopErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			stopErr = <-done
		}
		return stopErr
	}
	// The router logs through t: it must stop before the test ends.
	t.Cleanup(func() { _ = stop() })
	ready := "http://" + r.Addr(server.Health) + "/readyz"
	Eventually(t, func(ctx context.Context) error { return GetOK(ctx, ready) })
	return r, stop
}

// GetOK fails unless GET url answers 200.
func GetOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s %q", url, resp.Status, body)
	}
	return nil
}
