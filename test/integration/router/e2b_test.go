package router

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/server"
	"github.com/paddock-dev/paddock/test/framework"
)

// The router built as main builds it serves the E2B front door on its own listener: control-plane
// calls without a key get E2B's JSON 401, and the upstream proxy listener is unchanged.
func TestE2BListener(t *testing.T) {
	ns := env.Namespace(t)
	r := startRouter(t, func(c *router.Config) {
		c.Server.E2BHTTPAddr = "127.0.0.1:0"
		c.CredentialsSecret = types.NamespacedName{Namespace: ns, Name: credentials.KeySecretName}
		c.E2B = &router.E2BConfig{KeysNamespace: ns, CreateTimeout: framework.DefaultTimeout}
	})
	e2bURL := "http://" + r.Addr(server.E2BHTTP)
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(e2bURL + "/v2/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusUnauthorized || body.Code != 401 || body.Message == "" {
		t.Errorf("GET /v2/sandboxes without a key: %d %+v %v; want 401 with E2B's error body", resp.StatusCode, body, err)
	}
	if _, metrics, err := get(r.metricsURL + "/metrics"); err != nil || !strings.Contains(metrics, `sandbox_router_e2b_requests_total{code="401",operation="GET /v2/sandboxes"} 1`) {
		t.Errorf("metrics lack the 401 of GET /v2/sandboxes (%v):\n%s", err, metrics)
	}
	if code, _, err := get(r.proxyURL + "/v2/sandboxes"); err != nil || code != http.StatusBadRequest {
		t.Errorf("the proxy listener answered %d %v; want its own 400 for a request naming no sandbox", code, err)
	}
}

// The E2B listener over TLS alone (no proxy HTTPS listener) serves with the router's reloaded
// certificate, over HTTP/2 as the SDK negotiates it, and routes {port}-{id}.{domain} hosts to
// the data plane.
func TestE2BHTTPSHostRouting(t *testing.T) {
	ns := env.Namespace(t)
	dir := t.TempDir()
	cert := writeServingPair(t, dir, 1)
	r := startRouter(t, func(c *router.Config) {
		c.Server.E2BHTTPSAddr = "127.0.0.1:0"
		c.TLSCertFile, c.TLSKeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		c.CredentialsSecret = types.NamespacedName{Namespace: ns, Name: credentials.KeySecretName}
		c.E2B = &router.E2BConfig{KeysNamespace: ns, Domain: "e2b.test", CreateTimeout: framework.DefaultTimeout}
	})
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}}
	for host, want := range map[string]string{
		"49983-abc123.e2b.test": "needs its envdAccessToken", // data plane: no token
		"api.e2b.test":          "missing API key",           // control plane: no key
	} {
		req, _ := http.NewRequest(http.MethodGet, "https://"+r.Addr(server.E2BHTTPS)+"/health", nil)
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), want) || resp.ProtoMajor != 2 {
			t.Errorf("Host %s: %s %d %s; want HTTP/2 401 saying %q", host, resp.Proto, resp.StatusCode, b, want)
		}
	}
}
