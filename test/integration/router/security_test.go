package router

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
)

// TestPodIPHeaderReachesOnlyTheNamedSandbox: X-Sandbox-Pod-IP may pick one of the named
// Sandbox's own addresses and nothing else: not an unclaimed warm member, not an address that
// belongs to no Sandbox.
func TestPodIPHeaderReachesOnlyTheNamedSandbox(t *testing.T) {
	ns := env.Namespace(t)
	port := upstreams(t, map[string]http.Handler{"127.0.0.20": named("claimed"), "127.0.0.21": named("warm-member"), "127.0.0.22": named("no-sandbox")})
	createSandbox(t, builder.MakeSandbox("claimed", ns).Port("http", int32(port)).ReadyStatus("127.0.0.20"))
	createSandbox(t, builder.MakeSandbox("member", ns).Port("http", int32(port)).Label(agentsv1beta1.WarmPoolSandboxLabel, "0a1b2c3d").ReadyStatus("127.0.0.21"))
	r := startRouter(t, nil)
	r.eventually(t, ns, "claimed", port, http.StatusOK, "claimed", nil)

	got := map[string]string{}
	for _, tc := range []struct{ name, sandbox, podIP string }{
		{"own address", "claimed", "127.0.0.20"},
		{"a warm member's address", "claimed", "127.0.0.21"},
		{"an address of no sandbox", "claimed", "127.0.0.22"},
		{"the warm member by name", "member", "127.0.0.21"},
	} {
		code, body := r.call(t, http.MethodGet, ns, tc.sandbox, port, map[string]string{"X-Sandbox-Pod-IP": tc.podIP})
		got[tc.name] = fmt.Sprint(code)
		if code != http.StatusOK {
			got[tc.name] += " " + detail(t, body)
		}
	}
	want := map[string]string{
		"own address":              "200",
		"a warm member's address":  fmt.Sprintf(`403 X-Sandbox-Pod-IP 127.0.0.21 is not an address of Sandbox "claimed" in namespace %q; drop the header or send one of the sandbox's status.podIPs.`, ns),
		"an address of no sandbox": fmt.Sprintf(`403 X-Sandbox-Pod-IP 127.0.0.22 is not an address of Sandbox "claimed" in namespace %q; drop the header or send one of the sandbox's status.podIPs.`, ns),
		"the warm member by name":  fmt.Sprintf(`503 Sandbox "member" in namespace %q is an unclaimed warm-pool member; claim it with a SandboxClaim and route to the claimed sandbox.`, ns),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	expectMetric(t, r, `sandbox_router_denied_requests_total{reason="pod_ip_mismatch"} 2`)
	expectMetric(t, r, `sandbox_router_denied_requests_total{reason="unclaimed"} 1`)
}

// TestUndeclaredPortIsRefused: the router dials only ports the Sandbox's pod template declares,
// so X-Sandbox-Port cannot reach another service listening on the sandbox's address.
func TestUndeclaredPortIsRefused(t *testing.T) {
	ns := env.Namespace(t)
	declared := upstreams(t, map[string]http.Handler{"127.0.0.23": named("declared")})
	undeclared := upstreams(t, map[string]http.Handler{"127.0.0.23": named("undeclared")})
	createSandbox(t, builder.MakeSandbox("ported", ns).Port("http", int32(declared)).ReadyStatus("127.0.0.23"))
	r := startRouter(t, nil)
	r.eventually(t, ns, "ported", declared, http.StatusOK, "declared", nil)

	code, body := r.call(t, http.MethodGet, ns, "ported", undeclared, nil)
	want := fmt.Sprintf(`403 Port %d is not a containerPort of Sandbox "ported" in namespace %q; the router reaches only ports the sandbox's pod template declares.`, undeclared, ns)
	if diff := cmp.Diff(want, fmt.Sprint(code, " ", detail(t, body))); diff != "" {
		t.Errorf("undeclared port (-want +got):\n%s", diff)
	}
	expectMetric(t, r, `sandbox_router_denied_requests_total{reason="port_not_declared"} 1`)
}

// TestDefaultAuthorizationFailsClosed runs the router with the zero authorization settings:
// TokenReview with the per-sandbox access check. No token is 401; a valid token of an identity
// that was granted nothing is 403.
func TestDefaultAuthorizationFailsClosed(t *testing.T) {
	ns := env.Namespace(t)
	port := upstreams(t, map[string]http.Handler{"127.0.0.24": named("guarded")})
	createSandbox(t, builder.MakeSandbox("guarded", ns).Port("http", int32(port)).ReadyStatus("127.0.0.24"))
	token := framework.ServiceAccountToken(t, env.Config, ns, "stranger")
	r := startRouter(t, func(c *router.Config) {
		c.AuthzMode = ""
		c.TokenReview = authz.TokenReviewOptions{TTL: time.Second, CacheSize: 16}
	})
	r.eventually(t, ns, "guarded", port, http.StatusForbidden, "may not create sandboxes/proxy", map[string]string{"Authorization": "Bearer " + token})
	code, body := r.call(t, http.MethodGet, ns, "guarded", port, nil)
	if code != http.StatusUnauthorized || !strings.Contains(detail(t, body), "send a Kubernetes token") {
		t.Errorf("no token: %d %q, want 401", code, body)
	}
	expectMetric(t, r, `sandbox_router_denied_requests_total{reason="unauthenticated"} 1`)

	// Without the access check a token is still required.
	r = startRouter(t, func(c *router.Config) {
		c.AuthzMode = router.AuthzTokenReview
		c.TokenReview = authz.TokenReviewOptions{SkipAccessCheck: true, TTL: time.Second, CacheSize: 16}
	})
	if code, body := r.call(t, http.MethodGet, ns, "guarded", port, nil); code != http.StatusUnauthorized {
		t.Errorf("no token, access check skipped: %d %q, want 401", code, body)
	}
	r.eventually(t, ns, "guarded", port, http.StatusOK, "guarded", map[string]string{"Authorization": "Bearer " + token})
}

// TestRouterInjectsTheSandboxToken runs a real sandboxd that requires its sandbox token: the
// router replaces the client's Authorization with the token it derives from the key Secret,
// answers 503 naming the Secret until it exists, and follows a key rotation.
func TestRouterInjectsTheSandboxToken(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, time.Minute)
	key := []byte(strings.Repeat("k", credentials.KeySize))
	_, port := sandboxdWithToken(t, ns, "guarded", "127.0.0.25", func(sb *agentsv1beta1.Sandbox) string {
		return credentials.SandboxToken(key, ns, sb.Name, sb.UID)
	})

	secret := types.NamespacedName{Namespace: ns, Name: credentials.KeySecretName}
	r := startRouter(t, func(c *router.Config) {
		c.InjectSandboxToken = true
		c.CredentialsSecret = secret
	})
	client := map[string]string{"Authorization": "Bearer what-the-client-sent"}
	code, body := r.callPath(t, "/v1/metadata", ns, "guarded", port, client)
	wantMissing := fmt.Sprintf("the credentials key Secret %s does not exist yet", secret)
	if code != http.StatusServiceUnavailable || !strings.Contains(detail(t, body), wantMissing) {
		t.Errorf("before the key Secret exists: %d %q, want 503 naming %s", code, body, secret)
	}

	keySecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret.Name, Namespace: ns},
		Data: map[string][]byte{credentials.KeySecretDataKey: key}}
	framework.MustCreate(t, ctx, env.Client, keySecret)
	r.eventuallyPath(t, "/v1/metadata", ns, "guarded", port, http.StatusOK, `"env"`, client)

	// A new key changes every token; the router follows without a restart, so this sandboxd,
	// still holding the old one, refuses it.
	keySecret.Data[credentials.KeySecretDataKey] = []byte(strings.Repeat("n", credentials.KeySize))
	if err := env.Client.Update(ctx, keySecret); err != nil {
		t.Fatal(err)
	}
	r.eventuallyPath(t, "/v1/metadata", ns, "guarded", port, http.StatusUnauthorized, "", client)
}

// sandboxdWithToken is a Ready Sandbox ns/name at ip, served by a real sandboxd on a declared
// port that requires the token tokenOf gives for the created Sandbox.
func sandboxdWithToken(t *testing.T, ns, name, ip string, tokenOf func(*agentsv1beta1.Sandbox) string) (*agentsv1beta1.Sandbox, int) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	sb := createSandbox(t, builder.MakeSandbox(name, ns).Port("rest", int32(port)).ReadyStatus(ip))
	sandboxdtest.ServeWithToken(t, server.Listeners{REST: ln}, tokenOf(sb))
	return sb, port
}

func expectMetric(t *testing.T, r *runningRouter, line string) {
	t.Helper()
	_, metrics, err := get(r.metricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, line) {
		t.Errorf("metrics lack %s", line)
	}
}

// callPath is call with a path of the caller's choosing.
func (r *runningRouter) callPath(t testing.TB, path, ns, name string, port int, extra map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.proxyURL+path, nil)
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

func (r *runningRouter) eventuallyPath(t *testing.T, path, ns, name string, port, want int, wantBody string, extra map[string]string) {
	t.Helper()
	framework.Eventually(t, func(context.Context) error {
		code, body := r.callPath(t, path, ns, name, port, extra)
		if code != want || !strings.Contains(body, wantBody) {
			return fmt.Errorf("%s/%s%s answered %d %q, want %d and %q", ns, name, path, code, body, want, wantBody)
		}
		return nil
	})
}

// TestPerNamespaceRouterReadsEachSandboxsSecret runs the router as the per-namespace install
// does (--sandbox-token-source=sandbox-secrets): it never sees the installation's key and
// presents the token the controller wrote into the Sandbox's own Secret, only when that Secret
// is owned by this very Sandbox.
func TestPerNamespaceRouterReadsEachSandboxsSecret(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, time.Minute)
	// A token no key derives: only the Secret can tell the router what it is.
	token := "sandbox-token-of-guarded-only-in-its-secret"
	sb, port := sandboxdWithToken(t, ns, "guarded", "127.0.0.26", func(*agentsv1beta1.Sandbox) string { return token })

	r := startRouter(t, func(c *router.Config) {
		c.InjectSandboxToken = true
		c.SandboxTokenSource = router.TokensFromSandboxSecrets
		c.SandboxNamespaces = []string{ns}
	})
	client := map[string]string{"Authorization": "Bearer what-the-client-sent"}
	secretName := credentials.SandboxSecretName(sb.Name)
	code, body := r.callPath(t, "/v1/metadata", ns, sb.Name, port, client)
	if code != http.StatusServiceUnavailable || !strings.Contains(detail(t, body), secretName) {
		t.Errorf("before the Sandbox's Secret exists: %d %q, want 503 naming %s", code, body, secretName)
	}

	// A Secret of the right name left by an earlier Sandbox of the same name (another UID).
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns,
			Labels: map[string]string{agentsv1beta1.SandboxNameHashLabel: "any"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: "Sandbox",
				Name: sb.Name, UID: "uid-of-an-earlier-sandbox"}}},
		Data: map[string][]byte{credentials.TokenDataKey: []byte("stale-token"), credentials.ControlTokenDataKey: []byte("control")},
	}
	framework.MustCreate(t, ctx, env.Client, secret)
	r.eventuallyPath(t, "/v1/metadata", ns, sb.Name, port, http.StatusServiceUnavailable, "is not owned by the Sandbox", client)

	secret.OwnerReferences[0].UID = sb.UID
	secret.Data[credentials.TokenDataKey] = []byte(token)
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	r.eventuallyPath(t, "/v1/metadata", ns, sb.Name, port, http.StatusOK, `"env"`, client)
}
