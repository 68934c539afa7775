package router

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// nobody is the uid of a local client that is not the container runtime.
const nobody = 65534

// callAs sends one request to the router over a connection whose socket belongs to uid, as
// upstream's SDKs send it (X-Sandbox-* headers, no credential unless extra has one).
func (r *runningRouter) callAs(t *testing.T, uid int, path, ns, name string, port int, extra map[string]string) (int, string) {
	t.Helper()
	u, err := url.Parse(r.proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	conn := framework.DialAsUID(t, uid, u.Host)
	client := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }}}
	req := upstreamRequest(t, http.MethodGet, r.proxyURL+path, "", ns, name, port)
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("request as uid %d: %v", uid, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// upstreamRequest is a request as upstream's SDKs send it to the router: the X-Sandbox-* headers
// and a request ID, no credential.
func upstreamRequest(t *testing.T, method, url, body, ns, name string, port int) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Sandbox-ID", name)
	req.Header.Set("X-Sandbox-Namespace", ns)
	req.Header.Set("X-Sandbox-Port", strconv.Itoa(port))
	req.Header.Set("X-Request-ID", "0123456789abcdef")
	return req
}

// TestPortForwardedRequestsNeedNoToken runs the default router (TokenReview with the access
// check, token injection) with --accept-port-forward in front of a real sandboxd that requires
// its token. A client whose socket has the port-forward's shape (root, on loopback) reaches the
// sandbox without a credential, and the router still presents the sandbox's token and applies
// its address policy; a client of another uid on the same loopback, and any client of a router
// without the flag, gets 401; a credential that is sent is checked.
func TestPortForwardedRequestsNeedNoToken(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, time.Minute)
	key := []byte(strings.Repeat("p", credentials.KeySize))
	sb, port := sandboxdWithToken(t, ns, "forwarded", "127.0.0.31", func(sb *agentsv1beta1.Sandbox) string {
		return credentials.SandboxToken(key, ns, sb.Name, sb.UID)
	})
	keySecret := types.NamespacedName{Namespace: ns, Name: credentials.KeySecretName}
	framework.MustCreate(t, ctx, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: keySecret.Name, Namespace: ns},
		Data: map[string][]byte{credentials.KeySecretDataKey: key}})
	member := createSandbox(t, builder.MakeSandbox("member", ns).Port("rest", int32(port)).ReadyStatus("127.0.0.32").
		Label(agentsv1beta1.WarmPoolSandboxLabel, "0a1b2c3d"))

	secure := func(c *router.Config) {
		c.AuthzMode = router.AuthzTokenReview
		c.TokenReview = authz.TokenReviewOptions{TTL: time.Second, CacheSize: 16}
		c.InjectSandboxToken = true
		c.CredentialsSecret = keySecret
	}
	r := startRouter(t, func(c *router.Config) { secure(c); c.AcceptPortForward = true })
	framework.Eventually(t, func(context.Context) error {
		if code, body := r.callAs(t, 0, "/v1/metadata", ns, sb.Name, port, nil); code != http.StatusOK || !strings.Contains(body, `"env"`) {
			return fmt.Errorf("port-forwarded request: %d %q, want 200 from sandboxd", code, body)
		}
		return nil
	})

	if code, body := r.callAs(t, nobody, "/v1/metadata", ns, sb.Name, port, nil); code != http.StatusUnauthorized || !strings.Contains(detail(t, body), "belongs to uid 65534") {
		t.Errorf("uid %d on loopback: %d %q, want 401 saying why it is not the port-forward", nobody, code, body)
	}
	if code, body := r.callAs(t, 0, "/v1/metadata", ns, sb.Name, port, map[string]string{"Authorization": "Bearer made-up"}); code != http.StatusUnauthorized {
		t.Errorf("port-forwarded request with a made-up token: %d %q, want 401 (a credential sent is checked)", code, body)
	}
	// The address policy holds for the port-forward as for anyone.
	if code, body := r.callAs(t, 0, "/v1/metadata", ns, member.Name, port, nil); code != http.StatusServiceUnavailable {
		t.Errorf("port-forwarded request to a warm member: %d %q, want 503", code, body)
	}
	if code, body := r.callAs(t, 0, "/v1/metadata", ns, sb.Name, 10250, nil); code != http.StatusForbidden {
		t.Errorf("port-forwarded request to an undeclared port: %d %q, want 403", code, body)
	}
	if code, body := r.callAs(t, 0, "/v1/metadata", ns, sb.Name, port, map[string]string{"X-Sandbox-Pod-IP": "127.0.0.32"}); code != http.StatusForbidden {
		t.Errorf("port-forwarded request with another sandbox's pod IP: %d %q, want 403", code, body)
	}

	off := startRouter(t, secure)
	if code, body := off.callAs(t, 0, "/v1/metadata", ns, sb.Name, port, nil); code != http.StatusUnauthorized {
		t.Errorf("without --accept-port-forward: %d %q, want 401", code, body)
	}
}
