package e2bfrontdoor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/e2baccess"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

type detail struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	EndAt           string            `json:"endAt"`
	State           string            `json:"state"`
	Metadata        map[string]string `json:"metadata"`
	EnvdAccessToken string            `json:"envdAccessToken"`
}

// Create through both path sets makes a claim carrying the request, answers with the bound
// Sandbox's own token only once the daemon accepted a request with it, and get, list and kill
// behave as the SDK reads them.
func TestCreateGetListKill(t *testing.T) {
	h := start(t, 2)
	// The daemon refuses at first: create must keep waiting, not answer 201.
	h.daemon.accepting.Store(false)
	go func() {
		framework.Eventually(t, func(context.Context) error {
			h.daemon.mu.Lock()
			defer h.daemon.mu.Unlock()
			if len(h.daemon.tokens) == 0 {
				return fmt.Errorf("no probe yet")
			}
			return nil
		})
		h.daemon.accepting.Store(true)
	}()
	before := time.Now().Truncate(time.Second)
	sbx := h.create(t, "/v2/sandboxes", map[string]any{"templateID": "base", "metadata": map[string]string{"run": "r 1"},
		"envVars": map[string]string{"FOO": "bar"}, "timeout": 120})
	if h.daemon.accepted.Load() == 0 {
		t.Fatal("create answered 201 before the daemon accepted a request")
	}
	if !e2b.IsID(sbx.SandboxID) || sbx.TemplateID != "base" || sbx.EnvdVersion == "" || sbx.Domain == nil || *sbx.Domain != domain {
		t.Errorf("create answered %+v", sbx)
	}
	claim := h.claim(t, sbx.SandboxID)
	if claim.Spec.WarmPoolRef.Name != "python" || len(claim.Spec.Env) != 1 || claim.Spec.Env[0] != (extensionsv1beta1.EnvVar{Name: "FOO", Value: "bar"}) {
		t.Errorf("claim spec %+v: want pool python (alias base) and env FOO=bar", claim.Spec)
	}
	end := claim.Spec.Lifecycle.ShutdownTime.Time
	if end.Before(before.Add(120*time.Second)) || end.After(time.Now().Add(120*time.Second)) || claim.Spec.Lifecycle.ShutdownPolicy != extensionsv1beta1.ShutdownPolicyDelete {
		t.Errorf("claim lifecycle %+v: want deletion 120 s after create", claim.Spec.Lifecycle)
	}
	sb := h.boundSandbox(t, claim)
	if want := credentials.SandboxToken(h.key, sb.Namespace, sb.Name, sb.UID); sbx.EnvdAccessToken != want {
		t.Errorf("envdAccessToken is not the bound Sandbox's token")
	}

	v1 := h.create(t, "/sandboxes", map[string]any{"templateID": "python", "secure": true})
	if v1.TemplateID != "python" {
		t.Errorf("v1 create templateID %q, want python", v1.TemplateID)
	}

	var d detail
	h.call(t, http.MethodGet, "/sandboxes/"+sbx.SandboxID, h.apiKey, nil).into(t, &d)
	if d.State != e2b.StateRunning || d.Metadata["run"] != "r 1" || d.EndAt != end.UTC().Format(time.RFC3339) || d.EnvdAccessToken != sbx.EnvdAccessToken {
		t.Errorf("getInfo = %+v", d)
	}

	framework.Eventually(t, func(context.Context) error {
		r := h.call(t, http.MethodGet, "/v2/sandboxes?metadata="+url.QueryEscape("run=r 1"), h.apiKey, nil)
		var list []detail
		r.into(t, &list)
		if len(list) != 1 || list[0].SandboxID != sbx.SandboxID {
			return fmt.Errorf("list with metadata filter = %s", r.body)
		}
		return nil
	})
	framework.Eventually(t, func(context.Context) error {
		return pagesHold(t, h, []string{sbx.SandboxID, v1.SandboxID})
	})

	if r := h.call(t, http.MethodDelete, "/sandboxes/"+sbx.SandboxID, h.apiKey, nil); r.status != http.StatusNoContent {
		t.Fatalf("kill: %d %s", r.status, r.body)
	}
	if r := h.call(t, http.MethodDelete, "/sandboxes/"+sbx.SandboxID, h.apiKey, nil); r.status != http.StatusNotFound || r.code(t) != 404 {
		t.Errorf("second kill: %d %s; want 404 with code 404 (the SDK returns false)", r.status, r.body)
	}
	if r := h.call(t, http.MethodGet, "/sandboxes/"+sbx.SandboxID, h.apiKey, nil); r.status != http.StatusNotFound || r.code(t) != 404 {
		t.Errorf("getInfo after kill: %d %s", r.status, r.body)
	}
}

// pagesHold lists with limit 1 and checks the pages hold exactly ids, each once.
func pagesHold(t *testing.T, h *harness, ids []string) error {
	seen := map[string]int{}
	next := ""
	for pages := 0; pages <= len(ids); pages++ {
		r := h.call(t, http.MethodGet, "/v2/sandboxes?limit=1&nextToken="+next, h.apiKey, nil)
		var list []detail
		r.into(t, &list)
		for _, d := range list {
			seen[d.SandboxID]++
		}
		if next = r.header.Get(e2b.NextTokenHeader); next == "" {
			break
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			return fmt.Errorf("pages held %v; want each of %v once", seen, ids)
		}
	}
	if len(seen) != len(ids) {
		return fmt.Errorf("pages held %v; want only %v", seen, ids)
	}
	return nil
}

// A missing or unknown key gets 401 with E2B's body; a key sees only its own namespace, and a
// template no pool serves is an error naming it.
func TestAPIKeysAndTenancy(t *testing.T) {
	h := start(t, 1)
	for _, key := range []string{"", "not-a-key"} {
		if r := h.call(t, http.MethodGet, "/v2/sandboxes", key, nil); r.status != http.StatusUnauthorized || r.code(t) != 401 {
			t.Errorf("key %q: %d %s; want 401 JSON", key, r.status, r.body)
		}
	}
	sbx := h.create(t, "/v2/sandboxes", map[string]any{})
	for _, path := range []string{"/sandboxes/" + sbx.SandboxID, "/sandboxes/" + sbx.SandboxID + "/metrics"} {
		if r := h.call(t, http.MethodGet, path, h.otherKey, nil); r.status != http.StatusNotFound {
			t.Errorf("GET %s with another namespace's key: %d %s; want 404", path, r.status, r.body)
		}
	}
	if r := h.call(t, http.MethodDelete, "/sandboxes/"+sbx.SandboxID, h.otherKey, nil); r.status != http.StatusNotFound {
		t.Errorf("kill with another namespace's key: %d; want 404", r.status)
	}
	h.claim(t, sbx.SandboxID) // still there
	r := h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{"templateID": "nope"})
	if r.status != http.StatusNotFound || !strings.Contains(string(r.body), `\"nope\"`) {
		t.Errorf("unknown template: %d %s; want 404 naming the template", r.status, r.body)
	}
	if r := h.call(t, http.MethodGet, "/volumes", h.apiKey, nil); r.status != http.StatusNotImplemented || r.code(t) != 501 {
		t.Errorf("volumes: %d %s; want 501", r.status, r.body)
	}
	// Rotation: a key made by `paddock e2b create-key` works without a restart, and stops working
	// once its Secret is deleted.
	ctx := framework.Context(t, framework.DefaultTimeout)
	key, secret, err := e2baccess.CreateAPIKey(ctx, env.Client, h.keysNS, h.ns)
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(context.Context) error {
		if r := h.call(t, http.MethodGet, "/sandboxes/"+sbx.SandboxID, key, nil); r.status != http.StatusOK {
			return fmt.Errorf("new key: %d %s", r.status, r.body)
		}
		return nil
	})
	if err := env.Client.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(context.Context) error {
		if r := h.call(t, http.MethodGet, "/v2/sandboxes", key, nil); r.status != http.StatusUnauthorized {
			return fmt.Errorf("revoked key: %d, want 401", r.status)
		}
		return nil
	})
}

// setTimeout moves the claim's expiry; pause suspends the Sandbox (a second pause is 409),
// connect resumes it (201) and finds it running afterwards (200).
func TestTimeoutPauseConnect(t *testing.T) {
	h := start(t, 1)
	sbx := h.create(t, "/v2/sandboxes", map[string]any{})
	before := time.Now().Truncate(time.Second)
	if r := h.call(t, http.MethodPost, "/sandboxes/"+sbx.SandboxID+"/timeout", h.apiKey, map[string]any{"timeout": 3600}); r.status != http.StatusNoContent {
		t.Fatalf("setTimeout: %d %s", r.status, r.body)
	}
	if end := h.claim(t, sbx.SandboxID).Spec.Lifecycle.ShutdownTime.Time; end.Before(before.Add(time.Hour)) {
		t.Errorf("shutdownTime %s after setTimeout(3600 s) at %s", end, before)
	}

	path := "/sandboxes/" + sbx.SandboxID
	if r := h.call(t, http.MethodPost, path+"/pause", h.apiKey, map[string]any{"memory": true}); r.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	claim := h.claim(t, sbx.SandboxID)
	if sb := h.boundSandbox(t, claim); sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended {
		t.Errorf("Sandbox operatingMode %q after pause", sb.Spec.OperatingMode)
	}
	var d detail
	h.call(t, http.MethodGet, path, h.apiKey, nil).into(t, &d)
	if d.State != e2b.StatePaused {
		t.Errorf("getInfo state %q after pause", d.State)
	}
	if r := h.call(t, http.MethodPost, path+"/pause", h.apiKey, map[string]any{}); r.status != http.StatusConflict || r.code(t) != 409 {
		t.Errorf("second pause: %d %s; want 409 with code 409 (the SDK returns false)", r.status, r.body)
	}
	if r := h.call(t, http.MethodPost, "/v2"+path+"/connect", h.apiKey, map[string]any{"timeout": 60}); r.status != http.StatusCreated {
		t.Fatalf("connect to a paused sandbox: %d %s; want 201", r.status, r.body)
	}
	if sb := h.boundSandbox(t, claim); sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeRunning {
		t.Errorf("Sandbox operatingMode %q after connect", sb.Spec.OperatingMode)
	}
	if r := h.call(t, http.MethodPost, path+"/connect", h.apiKey, map[string]any{}); r.status != http.StatusOK {
		t.Errorf("connect to a running sandbox: %d %s; want 200", r.status, r.body)
	}
}

// A client that half-closes its connection once it has sent the request (nc, some proxies) still
// gets the answer: another namespace's key finds no sandbox (404), and the owner's gets it (200),
// instead of a 500 from API calls cancelled with the request's context. The attacker suite
// found this from busybox nc in a pod.
func TestHalfClosedClientGetsItsAnswer(t *testing.T) {
	h := start(t, 1)
	sbx := h.create(t, "/v2/sandboxes", map[string]any{})
	for key, want := range map[string]int{h.otherKey: http.StatusNotFound, h.apiKey: http.StatusOK} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(conn, "GET /sandboxes/%s HTTP/1.1\r\nHost: e2b\r\nX-API-Key: %s\r\nConnection: close\r\n\r\n", sbx.SandboxID, key); err != nil {
			t.Fatal(err)
		}
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(framework.DefaultTimeout))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /sandboxes/%s from a half-closed client: %d %s; want %d", sbx.SandboxID, resp.StatusCode, body, want)
		}
	}
}

// autoPause (the SDK's lifecycle.onTimeout "pause") makes the timeout the claim's idle timeout,
// with no expiry that would delete it; autoResume is its wake-on-request; setTimeout moves the
// idle timeout; autoResume without autoPause is refused with the fields named.
func TestAutoPauseCreatesAnIdlePolicy(t *testing.T) {
	h := start(t, 1)
	sbx := h.create(t, "/v2/sandboxes", map[string]any{"timeout": 90, "autoPause": true, "autoResume": map[string]any{"enabled": true}})
	claim := h.claim(t, sbx.SandboxID)
	if claim.Spec.Lifecycle != nil {
		t.Errorf("an autoPause claim has lifecycle %+v; its timeout must not delete it", claim.Spec.Lifecycle)
	}
	if got := claim.Annotations; got[agentsv1beta1.IdleTimeoutAnnotation] != "1m30s" || got[agentsv1beta1.WakeOnRequestAnnotation] != "true" {
		t.Errorf("claim annotations %v; want idle-timeout 1m30s and wake-on-request true", got)
	}
	if r := h.call(t, http.MethodPost, "/sandboxes/"+sbx.SandboxID+"/timeout", h.apiKey, map[string]any{"timeout": 3600}); r.status != http.StatusNoContent {
		t.Fatalf("setTimeout: %d %s", r.status, r.body)
	}
	claim = h.claim(t, sbx.SandboxID)
	if claim.Spec.Lifecycle != nil || claim.Annotations[agentsv1beta1.IdleTimeoutAnnotation] != "1h0m0s" || claim.Annotations[agentsv1beta1.WakeOnRequestAnnotation] != "true" {
		t.Errorf("after setTimeout(3600 s): lifecycle %+v, annotations %v; want idle timeout 1h and no expiry", claim.Spec.Lifecycle, claim.Annotations)
	}
	var d struct {
		Lifecycle struct {
			OnTimeout  string `json:"onTimeout"`
			AutoResume bool   `json:"autoResume"`
		} `json:"lifecycle"`
	}
	h.call(t, http.MethodGet, "/sandboxes/"+sbx.SandboxID, h.apiKey, nil).into(t, &d)
	if d.Lifecycle.OnTimeout != "pause" || !d.Lifecycle.AutoResume {
		t.Errorf("getInfo lifecycle %+v; want onTimeout pause, autoResume true", d.Lifecycle)
	}

	noWake := h.create(t, "/sandboxes", map[string]any{"autoPause": true})
	if got := h.claim(t, noWake.SandboxID).Annotations; got[agentsv1beta1.IdleTimeoutAnnotation] != "5m0s" || got[agentsv1beta1.WakeOnRequestAnnotation] != "false" {
		t.Errorf("autoPause without autoResume: annotations %v; want the default timeout and wake-on-request false", got)
	}
	if r := h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{"autoResume": map[string]any{"enabled": true}}); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "autoPause") {
		t.Errorf("autoResume without autoPause: %d %s; want 400 naming autoPause", r.status, r.body)
	}
}

// The data plane reaches the sandbox by E2b-Sandbox-Id or by {port}-{id}.{domain}, only with the
// sandbox's own token, and only on the daemon port or a port the Sandbox declares.
func TestDataPlane(t *testing.T) {
	h := start(t, 1)
	sbx := h.create(t, "/v2/sandboxes", map[string]any{})
	hdr := func(token, port string) map[string]string {
		return map[string]string{e2b.SandboxIDHeader: sbx.SandboxID, e2b.SandboxPortHeader: port, e2b.AccessTokenHeader: token}
	}
	r := h.do(t, http.MethodGet, h.url+"/files?path=a", nil, hdr(sbx.EnvdAccessToken, "49983"), "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `daemon GET /files routing-headers=""`) {
		t.Errorf("header routing: %d %s", r.status, r.body)
	}
	r = h.do(t, http.MethodGet, h.url+"/health", nil, map[string]string{e2b.AccessTokenHeader: sbx.EnvdAccessToken}, "49983-"+sbx.SandboxID+"."+domain)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "daemon GET /health") {
		t.Errorf("host routing: %d %s", r.status, r.body)
	}
	// The code-interpreter SDK proves the token on its context calls with trafficAccessToken in
	// E2b-Traffic-Access-Token only; the daemon gets it as X-Access-Token, which it checks.
	if sbx.TrafficAccessToken != sbx.EnvdAccessToken {
		t.Errorf("create answered trafficAccessToken %q; want the envdAccessToken", sbx.TrafficAccessToken)
	}
	r = h.do(t, http.MethodGet, h.url+"/contexts", nil, map[string]string{e2b.SandboxIDHeader: sbx.SandboxID, e2b.SandboxPortHeader: "49999",
		e2b.TrafficAccessTokenHeader: sbx.TrafficAccessToken}, "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "daemon GET /contexts") || h.daemon.lastToken() != sbx.EnvdAccessToken {
		t.Errorf("interpreter port with the traffic token: %d %s, the daemon saw X-Access-Token %q; want 200 with the sandbox token", r.status, r.body, h.daemon.lastToken())
	}
	for name, c := range map[string]struct {
		hdr  map[string]string
		want int
	}{
		"no token":                   {hdr("", "49983"), http.StatusUnauthorized},
		"interpreter port, no token": {hdr("", "49999"), http.StatusUnauthorized},
		"interpreter port, wrong traffic token": {map[string]string{e2b.SandboxIDHeader: sbx.SandboxID, e2b.SandboxPortHeader: "49999",
			e2b.TrafficAccessTokenHeader: "x" + sbx.EnvdAccessToken}, http.StatusUnauthorized},
		"wrong token":     {hdr("x"+sbx.EnvdAccessToken, "49983"), http.StatusUnauthorized},
		"undeclared port": {hdr(sbx.EnvdAccessToken, "8081"), http.StatusForbidden},
		"unknown sandbox": {map[string]string{e2b.SandboxIDHeader: "zzzz", e2b.AccessTokenHeader: "t"}, http.StatusBadGateway},
	} {
		if r := h.do(t, http.MethodGet, h.url+"/health", nil, c.hdr, ""); r.status != c.want {
			t.Errorf("%s: %d %s; want %d", name, r.status, r.body, c.want)
		}
	}
}

// Killing a sandbox deletes its claim and, through ownership, its Sandbox.
func TestKillDeletesTheClaim(t *testing.T) {
	h := start(t, 1)
	sbx := h.create(t, "/v2/sandboxes", map[string]any{})
	h.call(t, http.MethodDelete, "/sandboxes/"+sbx.SandboxID, h.apiKey, nil)
	framework.Eventually(t, func(ctx context.Context) error {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: sbx.SandboxID}, &extensionsv1beta1.SandboxClaim{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("claim still there: %v", err)
	})
}

// The `base` and `code-interpreter-v1` templates and pools that `paddock dev up` installs pass
// admission as they are.
func TestDevClusterBasePoolIsAdmitted(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	cfg := devcluster.Defaults("/var/lib/paddock-dev")
	for _, gvisor := range []bool{false, true} {
		for _, c := range []struct {
			tpl  *extensionsv1beta1.SandboxTemplate
			pool *extensionsv1beta1.SandboxWarmPool
		}{
			{devcluster.E2BTemplate(cfg.EnvBaseImage(), gvisor), devcluster.E2BPool()},
			{devcluster.CodeInterpreterTemplate(cfg.CodeInterpreterImage(), gvisor), devcluster.CodeInterpreterPool()},
		} {
			tpl, pool := c.tpl, c.pool
			tpl.Namespace, pool.Namespace = ns, ns
			if gvisor {
				tpl.Name += "-gvisor"
				pool.Name += "-gvisor"
				pool.Spec.TemplateRef.Name = tpl.Name
			}
			if err := env.Client.Create(ctx, tpl, client.DryRunAll); err != nil {
				t.Errorf("template %s: %v", tpl.Name, err)
			}
			if err := env.Client.Create(ctx, pool, client.DryRunAll); err != nil {
				t.Errorf("pool %s: %v", pool.Name, err)
			}
		}
	}
}

// Fifty concurrent creates against a pool of twenty all succeed, twenty warm and the rest cold;
// no Sandbox is bound to two claims, and the pool refills.
func TestConcurrentCreates(t *testing.T) {
	const pool, creates = 20, 50
	h := start(t, pool)
	framework.EventuallyWithin(t, 3*framework.DefaultTimeout, func(ctx context.Context) error { return poolReady(ctx, h, pool) })
	ids := make(chan string, creates)
	errs := make(chan error, creates)
	for range creates {
		go func() {
			r := h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{"templateID": "base"})
			if r.status != http.StatusCreated {
				errs <- fmt.Errorf("create: %d %s", r.status, r.body)
				return
			}
			var c created
			r.into(t, &c)
			ids <- c.SandboxID
		}()
	}
	seen := map[string]bool{}
	for range creates {
		select {
		case err := <-errs:
			t.Error(err)
		case id := <-ids:
			seen[id] = true
		}
	}
	if len(seen) != creates {
		t.Fatalf("%d distinct sandbox IDs from %d creates", len(seen), creates)
	}
	var sandboxes agentsv1beta1.SandboxList
	if err := env.Client.List(framework.Context(t, framework.DefaultTimeout), &sandboxes, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	boundTo := map[string]string{} // claim UID -> Sandbox
	warm := 0
	for _, sb := range sandboxes.Items {
		uid := sb.Labels[agentsv1beta1.ClaimUIDLabel]
		if uid == "" {
			continue
		}
		if other, ok := boundTo[uid]; ok {
			t.Errorf("claim UID %s bound to Sandboxes %s and %s", uid, other, sb.Name)
		}
		boundTo[uid] = sb.Name
		if sb.Labels[agentsv1beta1.LaunchTypeLabel] == agentsv1beta1.LaunchTypeWarm {
			warm++
		}
	}
	if len(boundTo) != creates {
		t.Errorf("%d Sandboxes bound to claims, want %d", len(boundTo), creates)
	}
	for id := range seen {
		if c := h.claim(t, id); boundTo[string(c.UID)] == "" {
			t.Errorf("claim %s has no Sandbox", id)
		}
	}
	t.Logf("%d of %d creates served warm", warm, creates)
	// The pool refills.
	framework.EventuallyWithin(t, 3*framework.DefaultTimeout, func(ctx context.Context) error { return poolReady(ctx, h, pool) })
}

// A sandbox is gone after its timeout: the claim controller enforces the expiry the front door
// wrote, and the front door then answers 404.
func TestSandboxGoneAfterTimeout(t *testing.T) {
	h := start(t, 1)
	sbx := h.create(t, "/v2/sandboxes", map[string]any{"timeout": 6})
	framework.Eventually(t, func(context.Context) error {
		if r := h.call(t, http.MethodGet, "/sandboxes/"+sbx.SandboxID, h.apiKey, nil); r.status != http.StatusNotFound {
			return fmt.Errorf("getInfo after the timeout: %d %s", r.status, r.body)
		}
		return nil
	})
}

// Without the credentials key Secret no token can be handed out: create answers 503 naming the
// Secret, and writes no claim.
func TestCreateWithoutTheCredentialsKey(t *testing.T) {
	h := start(t, 1)
	ctx := framework.Context(t, framework.DefaultTimeout)
	if err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.keysNS, Name: credentials.KeySecretName}}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(context.Context) error {
		if h.tokens.KeyErr() == nil {
			return errors.New("the token source has not seen the key Secret's deletion yet")
		}
		return nil
	})
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &extensionsv1beta1.SandboxClaimList{}, client.InNamespace(h.ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	r := h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{})
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), credentials.KeySecretName) {
		t.Errorf("create without the key: %d %s; want 503 naming %s", r.status, r.body, credentials.KeySecretName)
	}
	// A claim written and deleted again would have shown up on the watch by now.
	select {
	case ev := <-w.ResultChan():
		t.Errorf("a refused create wrote a claim: %s %v", ev.Type, ev.Object)
	default:
	}
}

// A claim deleted while its create waits (expired, or killed by hand) ends the wait with a 503
// that says so, instead of waiting out the create timeout.
func TestCreateEndsWhenItsClaimIsDeleted(t *testing.T) {
	h := start(t, 1)
	h.daemon.accepting.Store(false) // the create keeps waiting for the daemon
	done := make(chan response, 1)
	go func() { done <- h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{}) }()
	framework.Eventually(t, func(ctx context.Context) error {
		var claims extensionsv1beta1.SandboxClaimList
		if err := env.Client.List(ctx, &claims, client.InNamespace(h.ns)); err != nil || len(claims.Items) != 1 {
			return fmt.Errorf("claims: %d, %v", len(claims.Items), err)
		}
		return client.IgnoreNotFound(env.Client.Delete(ctx, &claims.Items[0]))
	})
	r := <-done
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "was deleted") {
		t.Errorf("create whose claim was deleted: %d %s; want 503 saying the claim was deleted", r.status, r.body)
	}
}

// A template whose sandboxd injection cannot be honoured (a volume named like the injection's)
// makes every Sandbox of it InjectionInvalid: create ends with a 503 carrying that condition as
// soon as its Sandbox reports it, instead of waiting out the create timeout.
func TestCreateFromATemplateThatCannotHostSandboxd(t *testing.T) {
	h := start(t, 1)
	ctx := framework.Context(t, framework.DefaultTimeout)
	tpl := builder.MakeTemplate("noinject-tpl", h.ns).InjectSandboxd().Port("envd", e2b.EnvdPort).Obj()
	tpl.Spec.PodTemplate.Spec.Volumes = []corev1.Volume{{Name: blueprint.SandboxdVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	framework.MustCreate(t, ctx, env.Client, tpl)
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("noinject", h.ns, "noinject-tpl").Replicas(1).Obj())
	var r response
	framework.Eventually(t, func(context.Context) error {
		if r = h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{"templateID": "noinject"}); r.status == http.StatusNotFound {
			return fmt.Errorf("the front door does not know pool noinject yet: %s", r.body)
		}
		return nil
	})
	body := string(r.body)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(body, agentsv1beta1.SandboxReasonInjectionInvalid) ||
		!strings.Contains(body, blueprint.SandboxdVolume) || !strings.Contains(body, "cannot be served") {
		t.Errorf("create from a template that cannot host sandboxd: %d %s; want 503 with the InjectionInvalid condition, at once", r.status, body)
	}
}

// A template whose container does not declare the daemon's port 49983 can never be reached (the
// router dials declared ports only): create ends as soon as a Sandbox is bound, with a 503 naming
// the port, instead of waiting out the create timeout, and leaves no claim behind.
func TestCreateFromATemplateWithoutTheEnvdPort(t *testing.T) {
	h := start(t, 1)
	ctx := framework.Context(t, framework.DefaultTimeout)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("noport-tpl", h.ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("noport", h.ns, "noport-tpl").Replicas(1).Obj())
	// The front door finds pools in its cache, which sees the new pool a moment after the API
	// server: until then create answers 404 and writes nothing.
	var r response
	framework.Eventually(t, func(context.Context) error {
		if r = h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{"templateID": "noport"}); r.status == http.StatusNotFound {
			return fmt.Errorf("the front door does not know pool noport yet: %s", r.body)
		}
		return nil
	})
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "does not declare container port 49983") ||
		strings.Contains(string(r.body), "deadline exceeded") {
		t.Errorf("create from a template without port 49983: %d %s; want 503 naming the port, at once", r.status, r.body)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		var claims extensionsv1beta1.SandboxClaimList
		if err := env.Client.List(ctx, &claims, client.InNamespace(h.ns), client.MatchingLabels{e2b.SandboxLabel: "true"}); err != nil {
			return err
		}
		for _, c := range claims.Items {
			if c.DeletionTimestamp == nil {
				return fmt.Errorf("claim %s of the failed create is still there", c.Name)
			}
		}
		return nil
	})
}

// E2B's network options become the claim's egress policy, reach the bound Sandbox's Pod
// template, show in getInfo, and PUT /network replaces them on the running sandbox.
func TestNetworkOptionsBecomeTheEgressPolicy(t *testing.T) {
	h := start(t, 1)
	sbx := h.create(t, "/v2/sandboxes", map[string]any{"allow_internet_access": false,
		"network": map[string]any{"allowOut": []string{"pypi.org", "203.0.113.7"}, "denyOut": []string{"0.0.0.0/0"}, "allowPublicTraffic": false}})
	const first = `{"allow":["pypi.org","203.0.113.7"],"deny":["0.0.0.0/0"]}`
	claim := h.claim(t, sbx.SandboxID)
	if got := claim.Annotations[egress.PolicyAnnotation]; got != first {
		t.Fatalf("claim policy %q, want %q", got, first)
	}
	sandboxPolicy := func(want string) string {
		var name string
		framework.Eventually(t, func(context.Context) error {
			sb := h.boundSandbox(t, h.claim(t, sbx.SandboxID))
			name = sb.Name
			if got := sb.Spec.PodTemplate.ObjectMeta.Annotations[egress.PolicyAnnotation]; got != want {
				return fmt.Errorf("the Sandbox's pod template has policy %q, want %q", got, want)
			}
			return nil
		})
		return name
	}
	before := sandboxPolicy(first)
	var d struct {
		Network             *e2b.NetworkConfig `json:"network"`
		AllowInternetAccess *bool              `json:"allowInternetAccess"`
	}
	h.call(t, http.MethodGet, "/sandboxes/"+sbx.SandboxID, h.apiKey, nil).into(t, &d)
	if d.Network == nil || strings.Join(d.Network.AllowOut, ",") != "pypi.org,203.0.113.7" || d.AllowInternetAccess == nil || *d.AllowInternetAccess {
		t.Fatalf("getInfo network %+v allowInternetAccess %v", d.Network, d.AllowInternetAccess)
	}

	if r := h.call(t, http.MethodPut, "/sandboxes/"+sbx.SandboxID+"/network", h.apiKey, map[string]any{"allowOut": []string{"example.test"}, "denyOut": []string{"0.0.0.0/0"}}); r.status != http.StatusNoContent {
		t.Fatalf("updateNetwork: %d %s", r.status, r.body)
	}
	if after := sandboxPolicy(`{"allow":["example.test"],"deny":["0.0.0.0/0"]}`); after != before {
		t.Errorf("the update replaced Sandbox %s with %s; it must apply to the running one", before, after)
	}
	d.Network, d.AllowInternetAccess = nil, nil
	h.call(t, http.MethodGet, "/sandboxes/"+sbx.SandboxID, h.apiKey, nil).into(t, &d)
	if d.Network == nil || strings.Join(d.Network.AllowOut, ",") != "example.test" || d.Network.AllowPublicTraffic == nil || d.AllowInternetAccess != nil {
		t.Errorf("getInfo after the update: network %+v allowInternetAccess %v; want the new egress and create's ingress options", d.Network, d.AllowInternetAccess)
	}
	if r := h.call(t, http.MethodPut, "/sandboxes/"+sbx.SandboxID+"/network", h.apiKey, map[string]any{}); r.status != http.StatusNoContent {
		t.Fatalf("updateNetwork {}: %d %s", r.status, r.body)
	}
	sandboxPolicy(`{}`)

	for _, tc := range []struct {
		path   string
		body   map[string]any
		status int
	}{
		{"/sandboxes/" + sbx.SandboxID + "/network", map[string]any{"allowOut": []string{"pypi.org"}}, http.StatusBadRequest},
		{"/sandboxes/" + sbx.SandboxID + "/network", map[string]any{"rules": map[string]any{"*": []any{map[string]any{}}}}, http.StatusBadRequest},
		{"/sandboxes/" + sbx.SandboxID + "/network", map[string]any{"egressProxy": map[string]any{"address": "proxy.example.test:1080"}}, http.StatusForbidden},
		{"/sandboxes/nosuchsandbox/network", map[string]any{}, http.StatusNotFound},
	} {
		if r := h.call(t, http.MethodPut, tc.path, h.apiKey, tc.body); r.status != tc.status {
			t.Errorf("PUT %s %v: %d %s, want %d", tc.path, tc.body, r.status, r.body, tc.status)
		}
	}
	if r := h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{"network": map[string]any{"denyOut": []string{"evil.test"}}}); r.status != http.StatusBadRequest ||
		!strings.Contains(string(r.body), "denyOut[0]") {
		t.Errorf("create with a domain in denyOut: %d %s, want 400 naming denyOut[0]", r.status, r.body)
	}

	// Paused: E2B answers 409 and changes nothing.
	if r := h.call(t, http.MethodPost, "/sandboxes/"+sbx.SandboxID+"/pause", h.apiKey, map[string]any{}); r.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	framework.Eventually(t, func(context.Context) error {
		r := h.call(t, http.MethodPut, "/sandboxes/"+sbx.SandboxID+"/network", h.apiKey, map[string]any{"allowOut": []string{"other.test"}, "denyOut": []string{"0.0.0.0/0"}})
		if r.status != http.StatusConflict || r.code(t) != 409 || !strings.Contains(string(r.body), "paused") {
			return fmt.Errorf("updateNetwork on a paused sandbox: %d %s, want 409 saying it is paused", r.status, r.body)
		}
		return nil
	})
	if got := h.claim(t, sbx.SandboxID).Annotations[egress.PolicyAnnotation]; got != `{}` {
		t.Errorf("a refused update on a paused sandbox changed the claim's policy to %q", got)
	}
}
