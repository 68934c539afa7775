package e2bfrontdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/router/e2b"
	"github.com/paddock-dev/paddock/internal/router/sandboxtoken"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

const domain = "e2b.test"

// daemon stands in for the sandboxes' envd: it refuses the probe until accepting is set and
// echoes what reached it on every other path.
type daemon struct {
	srv       *httptest.Server
	accepting atomic.Bool
	accepted  atomic.Int64
	mu        sync.Mutex
	tokens    []string
}

func newDaemon(t testing.TB) *daemon {
	d := &daemon{}
	d.accepting.Store(true)
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get(e2bapi.AccessTokenHeader)
		d.mu.Lock()
		d.tokens = append(d.tokens, tok)
		d.mu.Unlock()
		if r.URL.Path == e2bapi.ProbePath {
			if tok == "" || !d.accepting.Load() {
				http.Error(w, `{"code":"unavailable"}`, http.StatusServiceUnavailable)
				return
			}
			d.accepted.Add(1)
			_, _ = io.WriteString(w, `{"processes":[]}`)
			return
		}
		_, _ = fmt.Fprintf(w, "daemon %s %s routing-headers=%q", r.Method, r.URL.Path, r.Header.Get(e2bapi.SandboxIDHeader))
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// lastToken is the X-Access-Token of the last request that reached the daemon.
func (d *daemon) lastToken() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.tokens) == 0 {
		return ""
	}
	return d.tokens[len(d.tokens)-1]
}

// harness is a front door on loopback in front of one namespace's pool.
type harness struct {
	url      string
	ns       string
	apiKey   string
	key      []byte
	daemon   *daemon
	fd       *e2b.FrontDoor
	tokens   *sandboxtoken.Source
	keysNS   string
	otherKey string
	otherNS  string
	// metrics holds the front door's metrics.
	metrics *prometheus.Registry
}

// start creates the credentials key, API keys for ns and for a second namespace, template and
// pool "base" of poolSize in ns, and a front door whose transport dials the daemon stand-in
// whatever pod IP the Sandbox reports.
func start(t testing.TB, poolSize int32) *harness { return startWith(t, poolSize, "") }

// startWith is start with the front door dialling upstream instead of the stand-in daemon
// (whose requests are then not recorded); "" means the stand-in.
func startWith(t testing.TB, poolSize int32, upstream string) *harness {
	t.Helper()
	return startAs(t, poolSize, upstream, nil)
}

// startAs is startWith with the front door talking to the API server as identity returns (the
// test's admin when nil).
func startAs(t testing.TB, poolSize int32, upstream string, identity func(testing.TB, *harness) *rest.Config) *harness {
	t.Helper()
	ctx := framework.Context(t, framework.DefaultTimeout)
	h := &harness{ns: env.Namespace(t), keysNS: env.Namespace(t), otherNS: env.Namespace(t), daemon: newDaemon(t),
		apiKey: "key-" + fmt.Sprint(time.Now().UnixNano()), otherKey: "other-" + fmt.Sprint(time.Now().UnixNano())}
	env.PlayKubelet(t, h.ns)
	var err error
	if h.key, err = credentials.NewKey(); err != nil {
		t.Fatal(err)
	}
	framework.MustCreate(t, ctx, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: credentials.KeySecretName, Namespace: h.keysNS},
		Data: map[string][]byte{credentials.KeySecretDataKey: h.key}})
	h.addKey(t, "team-a", h.apiKey, h.ns)
	h.addKey(t, "team-b", h.otherKey, h.otherNS)
	tpl := builder.MakeTemplate("base-tpl", h.ns).EnvVarsInjectionPolicy(extensionsv1beta1.EnvVarsInjectionPolicyAllowed).Obj()
	tpl.Spec.PodTemplate.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "envd", ContainerPort: e2bapi.EnvdPort},
		{Name: "interpreter", ContainerPort: e2bapi.InterpreterPort}}
	framework.MustCreate(t, ctx, env.Client, tpl)
	pool := builder.MakeWarmPool("python", h.ns, "base-tpl").Replicas(poolSize).Obj()
	pool.Labels = map[string]string{e2bapi.TemplateLabel: "base"}
	framework.MustCreate(t, ctx, env.Client, pool)

	if upstream == "" {
		upstream = h.daemon.srv.Listener.Addr().String()
	}
	dial := &net.Dialer{Timeout: 5 * time.Second}
	transport := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dial.DialContext(ctx, network, upstream)
	}}
	// The router's own token source, watching the credentials key Secret.
	h.tokens = sandboxtoken.New(kubernetes.NewForConfigOrDie(env.Config), types.NamespacedName{Namespace: h.keysNS, Name: credentials.KeySecretName})
	h.metrics = prometheus.NewRegistry()
	kube := env.Config
	if identity != nil {
		kube = identity(t, h)
	}
	h.fd, err = e2b.New(e2b.Config{Kube: kube, Domain: domain, KeysNamespace: h.keysNS,
		Tokens: h.tokens, CreateTimeout: framework.DefaultTimeout, Transport: transport, Registry: h.metrics,
		Log: testr.NewWithInterface(t, testr.Options{Verbosity: 0})})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.fd.Start(runCtx) }()
	go h.tokens.Run(runCtx)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("front door cache: %v", err)
		}
	})
	if !h.fd.WaitForSync(ctx) || !h.tokens.WaitForSync(ctx) {
		t.Fatal("the front door's cache or the credentials key watch did not sync")
	}
	srv := httptest.NewServer(h.fd)
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

func (h *harness) addKey(t testing.TB, name, key, ns string) {
	t.Helper()
	framework.MustCreate(t, framework.Context(t, framework.DefaultTimeout), env.Client, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.keysNS, Labels: map[string]string{e2bapi.APIKeyNamespaceLabel: ns}},
		Data:       map[string][]byte{e2bapi.APIKeyDataKey: []byte(key)}})
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) into(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}

// code is the "code" of an E2B error body; the SDK reads it, so every error must carry it.
func (r response) code(t testing.TB) int {
	t.Helper()
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	r.into(t, &e)
	if e.Message == "" {
		t.Errorf("error body %q has no message", r.body)
	}
	return e.Code
}

// call sends one control-plane request with key (none when empty).
func (h *harness) call(t testing.TB, method, path, key string, body any) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	return h.do(t, method, h.url+path, rd, map[string]string{"X-API-KEY": key, "Content-Type": "application/json"}, "")
}

func (h *harness) do(t testing.TB, method, url string, body io.Reader, hdr map[string]string, host string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(framework.Context(t, 2*framework.DefaultTimeout), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// created is the create/connect answer.
type created struct {
	SandboxID       string `json:"sandboxID"`
	TemplateID      string `json:"templateID"`
	EnvdVersion     string `json:"envdVersion"`
	EnvdAccessToken string `json:"envdAccessToken"`
	// TrafficAccessToken is what the code-interpreter SDK sends in E2b-Traffic-Access-Token.
	TrafficAccessToken string  `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

func (h *harness) create(t testing.TB, path string, body map[string]any) created {
	t.Helper()
	r := h.call(t, http.MethodPost, path, h.apiKey, body)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var c created
	r.into(t, &c)
	return c
}

// claim reads the claim behind a sandbox ID.
func (h *harness) claim(t testing.TB, id string) *extensionsv1beta1.SandboxClaim {
	t.Helper()
	c := &extensionsv1beta1.SandboxClaim{}
	if err := env.Client.Get(framework.Context(t, framework.DefaultTimeout), client.ObjectKey{Namespace: h.ns, Name: id}, c); err != nil {
		t.Fatalf("claim of sandbox %s: %v", id, err)
	}
	return c
}

// boundSandbox is the Sandbox labelled with the claim's UID.
func (h *harness) boundSandbox(t testing.TB, c *extensionsv1beta1.SandboxClaim) *agentsv1beta1.Sandbox {
	t.Helper()
	var list agentsv1beta1.SandboxList
	if err := env.Client.List(framework.Context(t, framework.DefaultTimeout), &list, client.InNamespace(h.ns),
		client.MatchingLabels{agentsv1beta1.ClaimUIDLabel: string(c.UID)}); err != nil || len(list.Items) != 1 {
		t.Fatalf("Sandboxes bound to claim %s: %d, %v; want 1", c.Name, len(list.Items), err)
	}
	return &list.Items[0]
}

// poolReady reports, as an error, how far the harness's pool is from n ready members.
func poolReady(ctx context.Context, h *harness, n int32) error {
	var p extensionsv1beta1.SandboxWarmPool
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "python"}, &p); err != nil {
		return err
	}
	if p.Status.ReadyReplicas != n {
		return fmt.Errorf("pool python: %d ready, want %d", p.Status.ReadyReplicas, n)
	}
	return nil
}
