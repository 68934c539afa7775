package bench

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/bench"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/proxy"
	routerserver "github.com/paddock-dev/paddock/internal/router/server"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/test/framework"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
)

// The runtime scenario's sandbox and router "Pods" live on loopback addresses of their own, so
// sandboxd can listen on its fixed ports without meeting anything else on 127.0.0.1.
const (
	sandboxIP = "127.0.83.1"
	routerIP  = "127.0.83.2"
)

// TestRuntimeScenario runs the runtime scenario against a real sandboxd and a real paddock-router,
// both in-process on loopback, found through real Sandbox and Pod objects: the Sandbox's Pod gets
// sandboxd's address from the kubelet stand-in, the router's Pod is made here.
func TestRuntimeScenario(t *testing.T) {
	startRuntimeEnv(t)
	routerPort := startRouter(t)
	ctx := framework.Context(t, 5*time.Minute)
	routerNS := env.Namespace(t)
	routerPod(t, ctx, routerNS)

	runner, err := bench.NewRunner(env.Config, "")
	if err != nil {
		t.Fatal(err)
	}
	target := bench.DefaultRuntimeTarget()
	target.Router = bench.RouterTarget{Namespace: routerNS, Selector: "app=bench-router", Port: routerPort}
	runner.MeasureRuntime(target)
	s := bench.Scenario{Kind: bench.KindRuntime, Count: 20, LoadRequests: 200, Concurrency: 4, Timeout: 2 * time.Minute}
	res, err := runner.Run(ctx, s)
	if err != nil {
		t.Fatalf("runtime scenario: %v", err)
	}
	m := res.Runtime
	if m == nil {
		t.Fatalf("runtime scenario result has no runtime measurements: %+v", res)
	}
	var problems []string
	if m.PodIP != sandboxIP || m.RouterPod != "bench-router" || len(m.Problems) != 0 {
		problems = append(problems, "measured sandbox "+m.PodIP+" through router Pod "+m.RouterPod+", problems: "+strings.Join(m.Problems, "; "))
	}
	for name, sum := range map[string]bench.Summary{"exec": m.Exec, "routed exec": m.ExecRouted, "health": m.Health, "routed health": m.HealthRouted} {
		if sum.N != s.Count || !(sum.P50 > 0 && sum.P50 <= sum.P99 && sum.P99 <= sum.Max) {
			problems = append(problems, name+": "+strconv.Itoa(sum.N)+" samples, want "+strconv.Itoa(s.Count)+" with consistent percentiles")
		}
	}
	for name, l := range map[string]bench.Load{"direct load": m.Load, "routed load": m.LoadRouted} {
		if l.Requests != s.LoadRequests || l.Errors != 0 || l.Latency.N != s.LoadRequests || l.PerSecond <= 0 {
			problems = append(problems, name+": "+strconv.Itoa(l.Requests)+" requests, "+strconv.Itoa(l.Errors)+" errors")
		}
	}
	if len(problems) > 0 {
		t.Errorf("runtime scenario: %s", strings.Join(problems, "; "))
	}
	t.Logf("\n%s", bench.Markdown(&bench.Report{Scenarios: []bench.Result{res}}))
}

// TestRuntimeScenarioWithoutRouter records the missing router as a problem and still measures
// the sandbox.
func TestRuntimeScenarioWithoutRouter(t *testing.T) {
	startRuntimeEnv(t)
	ctx := framework.Context(t, 5*time.Minute)
	runner, err := bench.NewRunner(env.Config, "")
	if err != nil {
		t.Fatal(err)
	}
	target := bench.DefaultRuntimeTarget()
	target.Router.Namespace = env.Namespace(t) // no router Pod there
	runner.MeasureRuntime(target)
	res, err := runner.Run(ctx, bench.Scenario{Kind: bench.KindRuntime, Count: 5, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("runtime scenario: %v", err)
	}
	m := res.Runtime
	if m.Exec.N != 5 || m.ExecRouted.N != 0 || m.LoadRouted.Requests != 0 || len(m.Problems) != 1 ||
		!strings.Contains(m.Problems[0], "no Ready Pod matches \"app.kubernetes.io/name=paddock-router\"") ||
		!strings.Contains(m.Problems[0], "dist/paddock-router.yaml") {
		t.Errorf("without a router: exec %d samples, routed %d, problems %q; want 5 direct samples and a problem naming the selector and the router bundle",
			m.Exec.N, m.ExecRouted.N, m.Problems)
	}
}

// loopbackPodIPs gives the runtime scenario's sandbox Pod and the router Pod their addresses.
func loopbackPodIPs(key client.ObjectKey) string {
	switch key.Name {
	case "runtime":
		return sandboxIP
	case "bench-router":
		return routerIP
	}
	return ""
}

// startRuntimeEnv starts what both runtime tests need: the controllers, a kubelet stand-in that
// gives the scenario's Pods their loopback addresses, and sandboxd on sandboxIP at its default
// ports.
func startRuntimeEnv(t *testing.T) {
	t.Helper()
	startControllers(t)
	kubelet, err := startKubeletStandIn(env.Config, env.Client, 2, loopbackPodIPs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kubelet.stop)
	target := bench.DefaultRuntimeTarget()
	var ls server.Listeners
	for l, port := range map[*net.Listener]int{&ls.GRPC: 0, &ls.REST: target.RESTPort, &ls.Legacy: target.LegacyPort} {
		if *l, err = net.Listen("tcp", net.JoinHostPort(sandboxIP, strconv.Itoa(port))); err != nil {
			t.Fatalf("sandboxd listening on %s: %v", sandboxIP, err)
		}
	}
	sandboxdtest.Serve(t, ls)
}

// startRouter serves paddock-router in allow-all mode on routerIP, resolving Sandboxes from the
// API server, and returns its proxy port.
func startRouter(t *testing.T) int {
	t.Helper()
	r, err := router.New(router.Config{
		Server: routerserver.Options{HTTPAddr: routerIP + ":0", MetricsAddr: routerIP + ":0", HealthAddr: routerIP + ":0",
			ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10, ShutdownTimeout: 10 * time.Second},
		Kube: env.Config, SandboxCache: true, ClusterDomain: "cluster.local",
		AuthzMode: router.AuthzAllowAll, ProxyTimeout: time.Minute, DialTimeout: 5 * time.Second, ResponseTimeout: 30 * time.Second,
		Retry: proxy.RetryPolicy{Max: 1, InitialDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond},
		Log:   testr.NewWithOptions(t, testr.Options{Verbosity: 0}),
		// The sandbox's "Pod IP" is on loopback, which the router refuses unless told.
		Policy: headers.Policy{AllowLoopback: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("router: %v", err)
		}
	})
	_, port, err := net.SplitHostPort(r.Addr(routerserver.ProxyHTTP))
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// routerPod is the router's Pod object as the harness finds it; the kubelet stand-in makes it
// Ready with routerIP.
func routerPod(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	framework.MustCreate(t, ctx, env.Client, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-router", Namespace: ns, Labels: map[string]string{"app": "bench-router"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "router", Image: "paddock-router"}}},
	})
}
