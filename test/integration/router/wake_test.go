package router

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/activity"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/wake"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// echo answers every request with its body and counts the requests it got.
func echo(count *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		_, _ = io.Copy(w, r.Body)
	})
}

// suspendedSandbox creates a Sandbox suspended with the given suspend reason ("" for a manual
// suspension), as the Sandbox controller reports it.
func suspendedSandbox(t *testing.T, ns, name string, port int, reason string) *agentsv1beta1.Sandbox {
	t.Helper()
	w := builder.MakeSandbox(name, ns).Port("http", int32(port)).Suspended().NotReadyStatus()
	if reason != "" {
		w = w.Annotation(agentsv1beta1.SuspendReasonAnnotation, reason)
	}
	return createSandbox(t, w)
}

// playController stands in for the Sandbox controller until the test ends: once the Sandbox runs
// again, it reports it Ready on ip, as a resumed Pod would.
func playController(t *testing.T, sb *agentsv1beta1.Sandbox, ip string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			got := &agentsv1beta1.Sandbox{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), got); err == nil &&
				got.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeRunning &&
				!meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
				got.Status.PodIPs = []string{ip}
				meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: agentsv1beta1.SandboxConditionReady,
					Status: metav1.ConditionTrue, Reason: agentsv1beta1.SandboxReasonDependenciesReady})
				_ = env.Client.Status().Update(ctx, got)
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
}

func post(t *testing.T, rr *runningRouter, ns, name string, port int, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, rr.proxyURL+"/echo", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Sandbox-ID", name)
	req.Header.Set("X-Sandbox-Namespace", ns)
	req.Header.Set("X-Sandbox-Port", strconv.Itoa(port))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("request through the router: %v", err)
		return nil, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// Ten concurrent requests to a sandbox suspended for being idle: one resume, ten answers, each
// body forwarded exactly once.
func TestWakeOnRequestHoldsConcurrentRequestsBehindOneResume(t *testing.T) {
	ns := env.Namespace(t)
	var served atomic.Int64
	port := upstreams(t, map[string]http.Handler{"127.0.0.2": echo(&served)})
	sb := suspendedSandbox(t, ns, "sleepy", port, agentsv1beta1.SuspendReasonIdle)
	rr := startRouter(t, func(c *router.Config) { c.WakeOnRequest, c.WakeTimeout = true, time.Minute })
	playController(t, sb, "127.0.0.2")

	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			body := fmt.Sprintf("request %d", i)
			resp, got := post(t, rr, ns, sb.Name, port, body)
			if resp == nil || resp.StatusCode != http.StatusOK || got != body {
				t.Errorf("request %d: %v %q, want 200 with its own body", i, resp, got)
			}
		})
	}
	wg.Wait()
	if n := served.Load(); n != 10 {
		t.Errorf("upstream served %d requests, want 10 (no body replayed, none lost)", n)
	}
	if n := metricValue(t, rr, "sandbox_router_wake_resumes_total"); n != 1 {
		t.Errorf("sandbox_router_wake_resumes_total = %v, want 1", n)
	}
	if n := metricValue(t, rr, "sandbox_router_wakes_total"); n != 10 {
		t.Errorf("sandbox_router_wakes_total = %v, want 10 held requests", n)
	}
	got := &agentsv1beta1.Sandbox{}
	if err := env.Client.Get(framework.Context(t, 10*time.Second), client.ObjectKeyFromObject(sb), got); err != nil {
		t.Fatal(err)
	}
	if _, marked := got.Annotations[agentsv1beta1.SuspendReasonAnnotation]; marked || got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeRunning {
		t.Errorf("after the wake: operatingMode %q, annotations %v; want Running without a suspend reason", got.Spec.OperatingMode, got.Annotations)
	}
	if !wake.Resuming(got, time.Now(), time.Minute) {
		t.Errorf("after the wake: annotations %v; want %s stamped by the resume, for the other replicas", got.Annotations, agentsv1beta1.WokenAtAnnotation)
	}
}

// metricValue sums every series of a counter the router exports.
func metricValue(t *testing.T, rr *runningRouter, name string) float64 {
	t.Helper()
	families, err := rr.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// A sandbox suspended by hand, or for idleness with wake-on-request false, is never woken: the
// request is refused at once and the Sandbox stays suspended.
func TestManualSuspensionIsNotWokenByTraffic(t *testing.T) {
	ns := env.Namespace(t)
	var served atomic.Int64
	port := upstreams(t, map[string]http.Handler{"127.0.0.2": echo(&served)})
	rr := startRouter(t, func(c *router.Config) { c.WakeOnRequest, c.WakeTimeout = true, time.Minute })
	for name, reason := range map[string]string{"by-hand": "", "no-wake": agentsv1beta1.SuspendReasonIdleNoWake} {
		sb := suspendedSandbox(t, ns, name, port, reason)
		playController(t, sb, "127.0.0.2")
		framework.Eventually(t, func(context.Context) error {
			resp, body := post(t, rr, ns, name, port, "hello")
			if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(detail(t, body), "does not wake") {
				return fmt.Errorf("answer %v %q, want 503 saying traffic does not wake it", resp, body)
			}
			return nil
		})
		got := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(framework.Context(t, 10*time.Second), client.ObjectKeyFromObject(sb), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended {
			t.Errorf("%s: operatingMode %q after a request, want Suspended", name, got.Spec.OperatingMode)
		}
	}
	if n := served.Load(); n != 0 {
		t.Errorf("upstream served %d requests, want none", n)
	}
}

// A request that is not authorized never wakes a sandbox.
func TestUnauthorizedRequestDoesNotWake(t *testing.T) {
	ns := env.Namespace(t)
	var served atomic.Int64
	port := upstreams(t, map[string]http.Handler{"127.0.0.2": echo(&served)})
	sb := suspendedSandbox(t, ns, "guarded", port, agentsv1beta1.SuspendReasonIdle)
	rr := startRouter(t, func(c *router.Config) {
		c.WakeOnRequest, c.WakeTimeout = true, time.Minute
		c.AuthzMode = router.AuthzTokenReview
		c.TokenReview = authz.TokenReviewOptions{TTL: time.Second, CacheSize: 16}
	})
	resp, body := post(t, rr, ns, sb.Name, port, "hello")
	if resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated request: %v %q, want 401", resp, body)
	}
	got := &agentsv1beta1.Sandbox{}
	if err := env.Client.Get(framework.Context(t, 10*time.Second), client.ObjectKeyFromObject(sb), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended {
		t.Errorf("operatingMode %q after an unauthorized request, want Suspended", got.Spec.OperatingMode)
	}
}

// A sandbox that does not come back within --wake-timeout: 503, Retry-After and a JSON message.
func TestWakeTimeoutAnswers503WithRetryAfter(t *testing.T) {
	ns := env.Namespace(t)
	var served atomic.Int64
	port := upstreams(t, map[string]http.Handler{"127.0.0.2": echo(&served)})
	sb := suspendedSandbox(t, ns, "stuck", port, agentsv1beta1.SuspendReasonIdle)
	rr := startRouter(t, func(c *router.Config) { c.WakeOnRequest, c.WakeTimeout = true, time.Second })
	// No controller plays: the Sandbox never turns Ready.
	resp, body := post(t, rr, ns, sb.Name, port, "hello")
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(detail(t, body), "wake timeout") {
		t.Fatalf("answer %v %q, want 503 with Retry-After naming the wake timeout", resp, body)
	}
	if n := served.Load(); n != 0 {
		t.Errorf("upstream served %d requests, want none", n)
	}
}

// With --wake-on-request=false, a sandbox suspended for idleness stays suspended.
func TestWakeOnRequestOff(t *testing.T) {
	ns := env.Namespace(t)
	var served atomic.Int64
	port := upstreams(t, map[string]http.Handler{"127.0.0.2": echo(&served)})
	sb := suspendedSandbox(t, ns, "off", port, agentsv1beta1.SuspendReasonIdle)
	rr := startRouter(t, func(c *router.Config) { c.WakeOnRequest = false })
	framework.Eventually(t, func(context.Context) error {
		resp, body := post(t, rr, ns, sb.Name, port, "hello")
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(detail(t, body), "suspended") {
			return fmt.Errorf("answer %v %q, want 503 saying it is suspended", resp, body)
		}
		return nil
	})
}

// A request reaching a replica that did not make the resume, while the Sandbox another replica
// woke is Running but not Ready yet, is held until it is Ready; one to a Sandbox that is merely
// not Ready (no recent wake) is still refused at once.
func TestWakeHoldsRequestsAtAnotherReplica(t *testing.T) {
	ns := env.Namespace(t)
	var served atomic.Int64
	port := upstreams(t, map[string]http.Handler{"127.0.0.2": echo(&served)})
	// What another replica's resume patch leaves: Running, the wake's time, not Ready yet.
	woken := createSandbox(t, builder.MakeSandbox("woken", ns).Port("http", int32(port)).Running().NotReadyStatus().
		Annotation(agentsv1beta1.WokenAtAnnotation, activity.Format(time.Now())))
	starting := createSandbox(t, builder.MakeSandbox("starting", ns).Port("http", int32(port)).Running().NotReadyStatus().
		Annotation(agentsv1beta1.WokenAtAnnotation, activity.Format(time.Now().Add(-time.Hour))))
	rr := startRouter(t, func(c *router.Config) { c.WakeOnRequest, c.WakeTimeout = true, time.Minute })

	if resp, body := post(t, rr, ns, starting.Name, port, "x"); resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a Sandbox not Ready, woken an hour ago: %v %q, want 503 at once", resp, body)
	}
	answered := make(chan string, 1)
	go func() {
		resp, body := post(t, rr, ns, woken.Name, port, "held")
		if resp == nil || resp.StatusCode != http.StatusOK {
			body = fmt.Sprintf("%v %q", resp, body)
		}
		answered <- body
	}()
	// The request is held once this router waits on the resume itself.
	target := headers.Target{Namespace: ns, Name: woken.Name, Port: port}
	framework.Eventually(t, func(context.Context) error {
		select {
		case got := <-answered:
			t.Fatalf("answered %s before the Sandbox was Ready; want it held", got)
		default:
		}
		if !rr.Waker().Waking(target) {
			return fmt.Errorf("the request is not held yet")
		}
		return nil
	})
	playController(t, woken, "127.0.0.2")
	if got := <-answered; got != "held" {
		t.Errorf("held request: %s, want 200 with its body", got)
	}
	if n := metricValue(t, rr, "sandbox_router_wake_resumes_total"); n != 0 {
		t.Errorf("sandbox_router_wake_resumes_total = %v, want 0: the other replica resumed it", n)
	}
}
