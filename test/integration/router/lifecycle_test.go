package router

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestDrainingFinishesInFlightRequests starts shutdown while a request is held open upstream:
// /readyz must turn 503 "draining" first, the held request must still complete with its full
// body, and the router must stop cleanly afterwards.
func TestDrainingFinishesInFlightRequests(t *testing.T) {
	ns := env.Namespace(t)
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	port := upstreams(t, map[string]http.Handler{"127.0.0.9": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" {
			_, _ = io.WriteString(w, "fast")
			return
		}
		arrived <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "finished after drain began")
	})})
	createSandbox(t, builder.MakeSandbox("drainee", ns).Port("http", int32(port)).ReadyStatus("127.0.0.9"))
	r := startRouter(t, nil)
	r.eventually(t, ns, "drainee", port, http.StatusOK, "fast", nil)

	type result struct {
		code int
		body string
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, r.proxyURL+"/slow", nil)
		req.Header.Set("X-Sandbox-ID", "drainee")
		req.Header.Set("X-Sandbox-Namespace", ns)
		req.Header.Set("X-Sandbox-Port", strconv.Itoa(port))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			inflight <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		inflight <- result{code: resp.StatusCode, body: string(b), err: err}
	}()
	<-arrived

	stopped := make(chan error, 1)
	go func() { stopped <- r.stop() }()
	framework.Eventually(t, func(context.Context) error {
		code, body, err := get(r.healthURL + "/readyz")
		if err != nil || code != http.StatusServiceUnavailable || body != "draining\n" {
			return fmt.Errorf("readyz answered %d %q %v, want 503 draining", code, body, err)
		}
		return nil
	})
	select {
	case err := <-stopped:
		t.Fatalf("router stopped (%v) while a request was in flight", err)
	default:
	}
	close(release)
	got := <-inflight
	if got.err != nil || got.code != http.StatusOK || got.body != "finished after drain began" {
		t.Fatalf("in-flight request: %d %q %v", got.code, got.body, got.err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("router stopped with %v", err)
		}
	case <-time.After(framework.DefaultTimeout):
		t.Fatal("router did not stop after the last request finished")
	}
}
