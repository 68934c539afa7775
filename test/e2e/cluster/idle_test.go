package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/test/framework"
)

// idleTimeout is short so the test waits seconds, not minutes, for the controller to act.
const idleTimeout = "15s"

// testIdleWake proves scale to zero on the real node: a sandboxd Sandbox with a PVC goes idle and
// is suspended, a request through the router wakes it and gets its answer with the file written
// before, and ten concurrent requests to the suspended sandbox cause one resume and ten answers.
func testIdleWake(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 10*time.Minute)
	c := paddockClient(t)
	sb := sandboxdSandbox(t, "idler", ns).VolumeClaim("workspace", "64Mi").
		Annotation(agentsv1beta1.IdleTimeoutAnnotation, idleTimeout).Obj()
	// The template mounts volume "workspace" at sandboxd's root as an emptyDir; the claim template
	// of the same name replaces it with a PVC, so the root survives suspension.
	spec := &sb.Spec.PodTemplate.Spec
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "workspace" })
	framework.MustCreate(t, ctx, c, sb)
	waitSandboxReady(t, c, sb)
	routerIP := readyPodIP(t, routerNamespace, map[string]string{"app.kubernetes.io/name": routerName})
	router := "http://" + net.JoinHostPort(routerIP, "8080")
	ensureCredentialsKey(t, ctx)
	token := routerClientToken(t, ctx, ns)

	framework.Eventually(t, func(ctx context.Context) error {
		code, body, err := routed(ctx, http.MethodPut, router, "/v1/files/hello.txt", ns, sb.Name, token, "persisted\n")
		if err != nil || code != http.StatusNoContent {
			return fmt.Errorf("PUT /v1/files/hello.txt via the router = %d %q, %v", code, body, err)
		}
		return nil
	})

	waitIdleSuspended(t, c, sb)
	t.Run("a routed request wakes it and finds the file", func(t *testing.T) {
		code, body, err := routed(ctx, http.MethodGet, router, "/v1/files/hello.txt", ns, sb.Name, token, "")
		if err != nil || code != http.StatusOK || body != "persisted\n" {
			t.Fatalf("GET /v1/files/hello.txt via the router after idling = %d %q, %v; want 200 \"persisted\\n\"", code, body, err)
		}
	})

	waitIdleSuspended(t, c, sb)
	t.Run("ten concurrent requests share one resume", func(t *testing.T) {
		before := routerCounter(t, ctx, routerIP, "sandbox_router_wake_resumes_total")
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				code, body, err := routed(ctx, http.MethodGet, router, "/v1/files/hello.txt", ns, sb.Name, token, "")
				if err != nil || code != http.StatusOK || body != "persisted\n" {
					t.Errorf("request %d = %d %q, %v; want 200 with the file", i, code, body, err)
				}
			})
		}
		wg.Wait()
		if n := routerCounter(t, ctx, routerIP, "sandbox_router_wake_resumes_total") - before; n != 1 {
			t.Errorf("the router sent %v resumes for ten requests, want 1", n)
		}
	})
}

// waitIdleSuspended waits until the idle controller has suspended sb and the Sandbox controller
// reports it suspended for being idle.
func waitIdleSuspended(t *testing.T, c client.Client, sb *agentsv1beta1.Sandbox) {
	t.Helper()
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error {
		got := &agentsv1beta1.Sandbox{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionSuspended)
		if got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended || cond == nil || cond.Reason != agentsv1beta1.SandboxReasonIdle {
			return fmt.Errorf("operatingMode %q, annotations %v, Suspended condition %+v; want suspended with reason Idle",
				got.Spec.OperatingMode, got.Annotations, cond)
		}
		return nil
	})
}

func routed(ctx context.Context, method, router, path, ns, name, token, body string) (int, string, error) {
	req, err := routedRequest(ctx, method, router, path, ns, name, token, body)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// routerCounter reads one counter (summed over its series) from the router pod's metrics port.
func routerCounter(t *testing.T, ctx context.Context, routerIP, name string) float64 {
	t.Helper()
	// The router serves /metrics over HTTPS to callers allowed to get it (--metrics-secure):
	// scrape as the cluster's admin, and fail on anything but 200 so a refusal never reads as 0.
	body, err := adminMetrics(ctx, "https://"+net.JoinHostPort(routerIP, "9090")+"/metrics")
	if err != nil {
		t.Fatalf("scraping the router: %v", err)
	}
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 2 && (fields[0] == name || strings.HasPrefix(fields[0], name+"{")) {
			v, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// adminMetrics GETs a metrics URL with the admin's token, not verifying the self-signed
// certificate, and returns the body of a 200.
func adminMetrics(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+suite.restConfig.BearerToken)
	transport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the router's metrics certificate is self-signed
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s = %d: %s", url, resp.StatusCode, body)
	}
	return string(body), nil
}
