package router

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// callFrom sends upstream's request shape without a credential from source address ip.
func (r *runningRouter) callFrom(t *testing.T, ip, ns, name string, port int) (int, string) {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	resp, err := client.Do(upstreamRequest(t, http.MethodPost, r.proxyURL+"/execute", `{"command":"true"}`, ns, name, port))
	if err != nil {
		t.Fatalf("request from %s: %v", ip, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runningPod creates a Pod and gives it the status a kubelet would.
func runningPod(t *testing.T, w *builder.PodWrapper, ip string, phase corev1.PodPhase, hostNetwork bool) {
	t.Helper()
	ctx := framework.Context(t, 30*time.Second)
	p := w.Obj()
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: builder.DefaultImage}}
	p.Spec.HostNetwork = hostNetwork
	framework.MustCreate(t, ctx, env.Client, p)
	p.Status = corev1.PodStatus{Phase: phase, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// TestLabelledClientPodsNeedNoToken is the migration profile's router
// (--unauthenticated-client-pod-labels) in front of a TokenReview router: a running Pod with the
// client label in the sandbox's namespace is served without a credential, recognised by its
// address; an unlabelled Pod, a labelled Pod of another namespace, a sandbox labelled as a
// client, a hostNetwork Pod, a Pod not running and an address of no Pod get 401; the router
// without the flag serves none of them.
func TestLabelledClientPodsNeedNoToken(t *testing.T) {
	ns, other := env.Namespace(t), env.Namespace(t)
	port := upstreams(t, map[string]http.Handler{"127.0.0.36": named("served")})
	createSandbox(t, builder.MakeSandbox("target", ns).Port("http", int32(port)).ReadyStatus("127.0.0.36"))
	client := func(name, namespace string) *builder.PodWrapper {
		return builder.MakePod(name, namespace).Label(agentsv1beta1.SandboxClientLabel, "true")
	}
	runningPod(t, client("client", ns), "127.0.0.33", corev1.PodRunning, false)
	runningPod(t, builder.MakePod("unlabelled", ns), "127.0.0.34", corev1.PodRunning, false)
	runningPod(t, client("elsewhere", other), "127.0.0.35", corev1.PodRunning, false)
	runningPod(t, client("a-sandbox", ns).Label(agentsv1beta1.SandboxNameHashLabel, "0a1b2c3d"), "127.0.0.37", corev1.PodRunning, false)
	runningPod(t, client("on-the-node", ns), "127.0.0.38", corev1.PodRunning, true)
	runningPod(t, client("pending", ns), "127.0.0.40", corev1.PodPending, false)

	secure := func(c *router.Config) {
		c.AuthzMode = router.AuthzTokenReview
		c.TokenReview = authz.TokenReviewOptions{TTL: time.Second, CacheSize: 16}
	}
	r := startRouter(t, func(c *router.Config) {
		secure(c)
		c.ClientPodLabels = map[string]string{agentsv1beta1.SandboxClientLabel: "true"}
	})
	framework.Eventually(t, func(context.Context) error {
		if code, body := r.callFrom(t, "127.0.0.33", ns, "target", port); code != http.StatusOK || body != "served" {
			return fmt.Errorf("labelled client Pod: %d %q, want 200 served", code, body)
		}
		return nil
	})
	for _, tc := range []struct{ what, ip, why string }{
		{"an unlabelled Pod", "127.0.0.34", "send a Kubernetes token"},
		{"a labelled Pod of another namespace", "127.0.0.35", "is a client of namespace " + other},
		{"a sandbox labelled as a client", "127.0.0.37", "is a sandbox"},
		{"a hostNetwork Pod", "127.0.0.38", "shares its node's network"},
		{"a Pod that is not running", "127.0.0.40", "is not running"},
		{"an address of no Pod", "127.0.0.39", "send a Kubernetes token"},
	} {
		if code, body := r.callFrom(t, tc.ip, ns, "target", port); code != http.StatusUnauthorized || !strings.Contains(detail(t, body), tc.why) {
			t.Errorf("%s: %d %q, want 401 saying %q", tc.what, code, body, tc.why)
		}
	}

	off := startRouter(t, secure)
	if code, body := off.callFrom(t, "127.0.0.33", ns, "target", port); code != http.StatusUnauthorized {
		t.Errorf("labelled client Pod without the flag: %d %q, want 401", code, body)
	}
}
