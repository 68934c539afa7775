package router

import (
	"encoding/json"
	"net/http"
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
		c.E2B = &router.E2BConfig{KeysNamespace: ns, CreateTimeout: framework.DefaultTimeout,
			CredentialsSecret: types.NamespacedName{Namespace: ns, Name: credentials.KeySecretName}}
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
