package router

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/server"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// runningRouter is a router serving on loopback for one test.
type runningRouter struct {
	*router.Router
	proxyURL, healthURL, metricsURL string
	stop                            func() error
}

// startRouter builds the router the way main does, with test addresses and the loopback policy,
// and waits until /readyz passes (listeners bound, Sandbox cache synced).
func startRouter(t *testing.T, mutate func(*router.Config)) *runningRouter {
	t.Helper()
	cfg := framework.RouterConfig(t, env.Config)
	if mutate != nil {
		mutate(&cfg)
	}
	r, stop := framework.ServeRouter(t, cfg)
	return &runningRouter{Router: r, stop: stop,
		proxyURL:   "http://" + r.Addr(server.ProxyHTTP),
		healthURL:  "http://" + r.Addr(server.Health),
		metricsURL: "http://" + r.Addr(server.Metrics)}
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// call sends one request through the router to sandbox ns/name on port, with extra headers.
func (r *runningRouter) call(t testing.TB, method, ns, name string, port int, extra map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, r.proxyURL+"/whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Sandbox-ID", name)
	req.Header.Set("X-Sandbox-Namespace", ns)
	req.Header.Set("X-Sandbox-Port", strconv.Itoa(port))
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

func do(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("request through the router: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func detail(t testing.TB, body string) string {
	t.Helper()
	var d struct {
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatalf("body %q is not the router's JSON error shape: %v", body, err)
	}
	return d.Detail
}

// upstreams starts one HTTP server per loopback IP, all on the same port, so only the pod IP the
// router picked decides which one answers.
func upstreams(t *testing.T, handlers map[string]http.Handler) int {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		port, err := listenAllOnOnePort(t, handlers)
		if err == nil {
			return port
		}
		t.Logf("port clash, trying another: %v", err)
	}
	t.Fatal("could not find one free port on every loopback address")
	return 0
}

func listenAllOnOnePort(t *testing.T, handlers map[string]http.Handler) (int, error) {
	var lns []net.Listener
	port := 0
	for ip := range handlers {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return 0, err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		lns = append(lns, ln)
	}
	for _, ln := range lns {
		ip := ln.Addr().(*net.TCPAddr).IP.String()
		srv := &http.Server{Handler: handlers[ip], ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	return port, nil
}

func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, name)
	})
}

// createSandbox creates sb and then writes its status, as the controller would.
func createSandbox(t *testing.T, w *builder.SandboxWrapper) *agentsv1beta1.Sandbox {
	t.Helper()
	ctx := framework.Context(t, 30*time.Second)
	want := w.Obj()
	sb := want.DeepCopy()
	if err := env.Client.Create(ctx, sb); err != nil {
		t.Fatalf("creating sandbox %s/%s: %v", want.Namespace, want.Name, err)
	}
	if len(want.Status.Conditions) > 0 || len(want.Status.PodIPs) > 0 {
		sb.Status = want.Status
		if err := env.Client.Status().Update(ctx, sb); err != nil {
			t.Fatalf("writing status of sandbox %s/%s: %v", want.Namespace, want.Name, err)
		}
	}
	return sb
}

// eventually polls until a request for ns/name answers with status code want and a body that
// contains wantBody, for changes that must travel through the router's informer.
func (r *runningRouter) eventually(t *testing.T, ns, name string, port, want int, wantBody string, extra map[string]string) string {
	t.Helper()
	var body string
	framework.Eventually(t, func(context.Context) error {
		var code int
		code, body = r.call(t, http.MethodGet, ns, name, port, extra)
		if code != want || !strings.Contains(body, wantBody) {
			return fmt.Errorf("%s/%s answered %d %q, want %d and %q", ns, name, code, body, want, wantBody)
		}
		return nil
	})
	return body
}
