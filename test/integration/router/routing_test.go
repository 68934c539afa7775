package router

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/scopedtoken"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

func TestRequestsLandOnTheNamedSandbox(t *testing.T) {
	ns := env.Namespace(t)
	port := upstreams(t, map[string]http.Handler{"127.0.0.2": named("alpha"), "127.0.0.3": named("beta")})
	createSandbox(t, builder.MakeSandbox("alpha", ns).Port("http", int32(port)).ReadyStatus("127.0.0.2"))
	createSandbox(t, builder.MakeSandbox("beta", ns).Port("http", int32(port)).ReadyStatus("127.0.0.3"))
	r := startRouter(t, nil)

	r.eventually(t, ns, "beta", port, http.StatusOK, "beta", nil)
	for range 3 {
		for _, name := range []string{"alpha", "beta", "alpha"} {
			code, body := r.call(t, http.MethodGet, ns, name, port, nil)
			if diff := cmp.Diff(fmt.Sprint(200, name), fmt.Sprint(code, body)); diff != "" {
				t.Fatalf("request for %s (-want +got):\n%s", name, diff)
			}
		}
	}

	// The metrics carry the namespace of a known Sandbox and nothing per sandbox.
	_, metrics, err := get(r.metricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`sandbox_router_requests_total{code="200",method="GET",sandbox_namespace=%q}`, ns)
	if !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %s", want)
	}
}

func TestUnknownNotReadyAndUnclaimedSandboxes(t *testing.T) {
	ns := env.Namespace(t)
	port := upstreams(t, map[string]http.Handler{"127.0.0.4": named("gamma")})
	r := startRouter(t, nil)
	ctx := framework.Context(t, time.Minute)

	code, body := r.call(t, http.MethodGet, ns, "gamma", port, nil)
	if diff := cmp.Diff(fmt.Sprint(404, fmt.Sprintf(`Sandbox "gamma" not found in namespace %q.`, ns)), fmt.Sprint(code, detail(t, body))); diff != "" {
		t.Errorf("unknown sandbox (-want +got):\n%s", diff)
	}

	sb := createSandbox(t, builder.MakeSandbox("gamma", ns).Port("http", int32(port)).NotReadyStatus())
	body = r.eventually(t, ns, "gamma", port, http.StatusServiceUnavailable, "reason DependenciesNotReady", nil)
	if diff := cmp.Diff(fmt.Sprintf(`Sandbox "gamma" in namespace %q is not ready (Ready is False, reason DependenciesNotReady); retry once it is Ready.`, ns), detail(t, body)); diff != "" {
		t.Errorf("not-ready detail (-want +got):\n%s", diff)
	}

	// Ready, but still an unclaimed warm-pool member: not routable.
	sb.Labels = map[string]string{agentsv1beta1.WarmPoolSandboxLabel: "0a1b2c3d"}
	if err := env.Client.Update(ctx, sb); err != nil {
		t.Fatal(err)
	}
	sb.Status = builder.MakeSandbox("gamma", ns).Port("http", int32(port)).ReadyStatus("127.0.0.4").Obj().Status
	if err := env.Client.Status().Update(ctx, sb); err != nil {
		t.Fatal(err)
	}
	r.eventually(t, ns, "gamma", port, http.StatusServiceUnavailable, "unclaimed warm-pool member", nil)

	// Adoption removes the label; the sandbox becomes routable.
	sb.Labels = nil
	if err := env.Client.Update(ctx, sb); err != nil {
		t.Fatal(err)
	}
	r.eventually(t, ns, "gamma", port, http.StatusOK, "gamma", nil)

	// A UID that does not match (the name was reused) is not found.
	code, body = r.call(t, http.MethodGet, ns, "gamma", port, map[string]string{"X-Sandbox-UID": "not-the-uid"})
	if code != http.StatusNotFound {
		t.Errorf("stale UID: %d %q", code, body)
	}
	code, _ = r.call(t, http.MethodGet, ns, "gamma", port, map[string]string{"X-Sandbox-UID": string(sb.UID)})
	if code != http.StatusOK {
		t.Errorf("matching UID: %d", code)
	}

	// Deleted: not found again.
	if err := env.Client.Delete(ctx, sb); err != nil {
		t.Fatal(err)
	}
	r.eventually(t, ns, "gamma", port, http.StatusNotFound, "not found", nil)
}

func TestScopedTokenReachesOnlyItsSandbox(t *testing.T) {
	ns := env.Namespace(t)
	port := upstreams(t, map[string]http.Handler{"127.0.0.5": named("one"), "127.0.0.6": named("two")})
	createSandbox(t, builder.MakeSandbox("one", ns).Port("http", int32(port)).ReadyStatus("127.0.0.5"))
	createSandbox(t, builder.MakeSandbox("two", ns).Port("http", int32(port)).ReadyStatus("127.0.0.6"))
	keyFile := filepath.Join(t.TempDir(), "keys")
	key := strings.Repeat("k3y-", 12)
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRouter(t, func(c *router.Config) {
		c.AuthzMode = router.AuthzScopedToken
		c.ScopedTokenKeys = keyFile
	})
	keys, err := scopedtoken.ParseKeys([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	tokenOne, err := keys.Mint(ns, "one", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	bearer := map[string]string{"Authorization": "Bearer " + tokenOne}

	r.eventually(t, ns, "one", port, http.StatusOK, "one", bearer)
	code, body := r.call(t, http.MethodGet, ns, "two", port, bearer)
	if code != http.StatusForbidden || !strings.Contains(detail(t, body), "scoped to sandbox "+ns+"/one") {
		t.Errorf("other sandbox: %d %q, want 403", code, body)
	}
	code, body = r.call(t, http.MethodGet, ns, "two", port, map[string]string{
		"Authorization": "Bearer " + tokenOne, "X-Sandbox-Pod-IP": "127.0.0.6"})
	if code != http.StatusForbidden {
		t.Errorf("pod-IP override with a token for another sandbox: %d %q, want 403", code, body)
	}
	code, _ = r.call(t, http.MethodGet, ns, "one", port, nil)
	if code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	otherKeys, _ := scopedtoken.ParseKeys([]byte(strings.Repeat("x", 40)))
	forged, _ := otherKeys.Mint(ns, "one", time.Hour, time.Now())
	code, _ = r.call(t, http.MethodGet, ns, "one", port, map[string]string{"Authorization": "Bearer " + forged})
	if code != http.StatusUnauthorized {
		t.Errorf("token signed with another key: %d, want 401", code)
	}
}
