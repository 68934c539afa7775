package router

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/activity"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/server"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// e2bRouter is a router built as main builds it, with the E2B front door in front of a daemon
// stand-in on loopback that answers the front door's probe and counts every other request.
type e2bRouter struct {
	*runningRouter
	url    string
	ns     string
	apiKey string
	key    []byte
	port   int
	hits   *atomic.Int64
}

func startE2BRouter(t *testing.T) *e2bRouter {
	t.Helper()
	ctx := framework.Context(t, 30*time.Second)
	er := &e2bRouter{ns: env.Namespace(t), apiKey: "key-" + strconv.FormatInt(time.Now().UnixNano(), 36), hits: &atomic.Int64{}}
	var err error
	if er.key, err = credentials.NewKey(); err != nil {
		t.Fatal(err)
	}
	framework.MustCreate(t, ctx, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: credentials.KeySecretName, Namespace: er.ns},
		Data: map[string][]byte{credentials.KeySecretDataKey: er.key}})
	framework.MustCreate(t, ctx, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: er.ns,
		Labels: map[string]string{e2b.APIKeyNamespaceLabel: er.ns}}, Data: map[string][]byte{e2b.APIKeyDataKey: []byte(er.apiKey)}})
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == e2b.ProbePath {
			_, _ = io.WriteString(w, `{"processes":[]}`)
			return
		}
		er.hits.Add(1)
		_, _ = io.WriteString(w, "daemon answered")
	}))
	t.Cleanup(daemon.Close)
	_, port, _ := net.SplitHostPort(daemon.Listener.Addr().String())
	er.port, _ = strconv.Atoi(port)
	er.runningRouter = startRouter(t, func(c *router.Config) {
		c.Server.E2BHTTPAddr = "127.0.0.1:0"
		c.CredentialsSecret = types.NamespacedName{Namespace: er.ns, Name: credentials.KeySecretName}
		c.E2B = &router.E2BConfig{KeysNamespace: er.ns, CreateTimeout: framework.DefaultTimeout, DaemonPort: er.port}
		c.WakeOnRequest, c.WakeTimeout = true, framework.DefaultTimeout
	})
	er.url = "http://" + er.Addr(server.E2BHTTP)
	return er
}

// sandbox makes what a create leaves behind: a front-door claim with the given annotations and
// its bound Sandbox, built by w (which must declare the daemon port), and returns the sandbox ID,
// the Sandbox and its envdAccessToken.
func (er *e2bRouter) sandbox(t *testing.T, claimAnnotations map[string]string, w func(*builder.SandboxWrapper) *builder.SandboxWrapper) (string, *agentsv1beta1.Sandbox, string) {
	t.Helper()
	ctx := framework.Context(t, 30*time.Second)
	id, err := e2b.NewID()
	if err != nil {
		t.Fatal(err)
	}
	claim := &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: er.ns,
		Labels: map[string]string{e2b.SandboxLabel: "true"}, Annotations: claimAnnotations},
		Spec: extensionsv1beta1.SandboxClaimSpec{WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: "base"}}}
	framework.MustCreate(t, ctx, env.Client, claim)
	sb := createSandbox(t, w(builder.MakeSandbox("member-"+id, er.ns).Port("envd", int32(er.port)).
		Label(agentsv1beta1.ClaimUIDLabel, string(claim.UID))))
	return id, sb, credentials.SandboxToken(er.key, sb.Namespace, sb.Name, sb.UID)
}

// data sends a data-plane request for sandbox id with token, in E2B_SANDBOX_URL mode.
func (er *e2bRouter) data(t *testing.T, id, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(framework.Context(t, 2*framework.DefaultTimeout), http.MethodGet, er.url+"/files?path=/etc/hostname", nil)
	req.Header.Set(e2b.SandboxIDHeader, id)
	req.Header.Set(e2b.SandboxPortHeader, strconv.Itoa(e2b.EnvdPort))
	req.Header.Set(e2b.AccessTokenHeader, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (er *e2bRouter) connect(t *testing.T, id string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(framework.Context(t, 2*framework.DefaultTimeout), http.MethodPost, er.url+"/v2/sandboxes/"+id+"/connect", strings.NewReader(`{"timeout":600}`))
	req.Header.Set(e2b.APIKeyHeader, er.apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func mode(t *testing.T, sb *agentsv1beta1.Sandbox) agentsv1beta1.SandboxOperatingMode {
	t.Helper()
	got := &agentsv1beta1.Sandbox{}
	if err := env.Client.Get(framework.Context(t, 30*time.Second), client.ObjectKeyFromObject(sb), got); err != nil {
		t.Fatal(err)
	}
	return got.Spec.OperatingMode
}

// autoPauseAnnotations are what a create with autoPause (and autoResume when wake) puts on the claim.
func autoPauseAnnotations(wake bool) map[string]string {
	return map[string]string{agentsv1beta1.IdleTimeoutAnnotation: "5m", agentsv1beta1.WakeOnRequestAnnotation: strconv.FormatBool(wake)}
}

// An autoResume sandbox the idle controller paused is woken by a data-plane request through the
// router's Waker, and the request, held meanwhile, gets the daemon's answer. Without autoResume,
// or paused through the API, traffic gets a 503 saying so and the sandbox stays paused.
func TestE2BDataPlaneWakesOnlyAutoResumeSandboxes(t *testing.T) {
	er := startE2BRouter(t)
	suspended := func(reason string) func(*builder.SandboxWrapper) *builder.SandboxWrapper {
		return func(w *builder.SandboxWrapper) *builder.SandboxWrapper {
			w = w.Suspended().NotReadyStatus()
			if reason != "" {
				w = w.Annotation(agentsv1beta1.SuspendReasonAnnotation, reason)
			}
			return w
		}
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		reason      string
	}{
		{"created without autoResume, paused for being idle", autoPauseAnnotations(false), agentsv1beta1.SuspendReasonIdleNoWake},
		{"created with autoResume, paused through the API", autoPauseAnnotations(true), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, sb, token := er.sandbox(t, tc.annotations, suspended(tc.reason))
			playController(t, sb, "127.0.0.1")
			before := er.hits.Load()
			if code, body := er.data(t, id, token); code != http.StatusServiceUnavailable || !strings.Contains(body, "paused") || !strings.Contains(body, "Sandbox.connect") {
				t.Errorf("data-plane request: %d %s; want 503 saying the sandbox is paused and connect resumes it", code, body)
			}
			if got := mode(t, sb); got != agentsv1beta1.SandboxOperatingModeSuspended || er.hits.Load() != before {
				t.Errorf("operatingMode %s, daemon hits %d; want the sandbox left Suspended and the daemon unreached", got, er.hits.Load()-before)
			}
			// connect is the explicit way back, with or without autoResume.
			if code, body := er.connect(t, id); code != http.StatusCreated {
				t.Errorf("connect: %d %s; want 201 (resumed)", code, body)
			}
			if got := mode(t, sb); got != agentsv1beta1.SandboxOperatingModeRunning {
				t.Errorf("operatingMode %s after connect, want Running", got)
			}
		})
	}

	t.Run("created with autoResume, paused for being idle", func(t *testing.T) {
		id, sb, token := er.sandbox(t, autoPauseAnnotations(true), suspended(agentsv1beta1.SuspendReasonIdle))
		if code, body := er.data(t, id, "not-"+token); code != http.StatusUnauthorized {
			t.Errorf("data-plane request with a wrong token: %d %s; want 401", code, body)
		}
		if got := mode(t, sb); got != agentsv1beta1.SandboxOperatingModeSuspended {
			t.Fatalf("a request without the sandbox's token woke it: operatingMode %s", got)
		}
		playController(t, sb, "127.0.0.1")
		before := er.hits.Load()
		if code, body := er.data(t, id, token); code != http.StatusOK || body != "daemon answered" {
			t.Errorf("data-plane request: %d %q; want the daemon's answer once woken", code, body)
		}
		if got := mode(t, sb); got != agentsv1beta1.SandboxOperatingModeRunning || er.hits.Load() != before+1 {
			t.Errorf("operatingMode %s, daemon hits %d; want Running and the one request delivered", got, er.hits.Load()-before)
		}
	})

	t.Run("connect to an autoResume sandbox paused for being idle wakes it through the Waker", func(t *testing.T) {
		id, sb, _ := er.sandbox(t, autoPauseAnnotations(true), suspended(agentsv1beta1.SuspendReasonIdle))
		playController(t, sb, "127.0.0.1")
		if code, body := er.connect(t, id); code != http.StatusCreated {
			t.Errorf("connect: %d %s; want 201 (resumed)", code, body)
		}
		got := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(framework.Context(t, 30*time.Second), client.ObjectKeyFromObject(sb), got); err != nil {
			t.Fatal(err)
		}
		// The Waker's resume patch removes the reason; a plain operatingMode patch would not.
		if _, marked := got.Annotations[agentsv1beta1.SuspendReasonAnnotation]; got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeRunning || marked {
			t.Errorf("operatingMode %s, annotations %v; want Running, resumed by the Waker", got.Spec.OperatingMode, got.Annotations)
		}
		claim := &extensionsv1beta1.SandboxClaim{}
		if err := env.Client.Get(framework.Context(t, 30*time.Second), client.ObjectKey{Namespace: er.ns, Name: id}, claim); err != nil {
			t.Fatal(err)
		}
		if claim.Spec.Lifecycle != nil || claim.Annotations[agentsv1beta1.IdleTimeoutAnnotation] != "10m0s" {
			t.Errorf("claim lifecycle %+v, idle timeout %q; want no expiry and connect's timeout 600 s as the idle timeout",
				claim.Spec.Lifecycle, claim.Annotations[agentsv1beta1.IdleTimeoutAnnotation])
		}
	})
}

// Data-plane requests forwarded to a sandbox are idle activity, as the router's other traffic
// is: the reporter writes paddock.dev/last-activity for them; refused ones do not count.
func TestE2BDataPlaneIsIdleActivity(t *testing.T) {
	er := startE2BRouter(t)
	long := time.Now().Add(-time.Hour).Truncate(time.Second)
	stale := func(w *builder.SandboxWrapper) *builder.SandboxWrapper {
		return w.Annotation(agentsv1beta1.LastActivityAnnotation, activity.Format(long)).ReadyStatus("127.0.0.1")
	}
	// Refused is created first: a router cache that shows used shows refused too.
	refusedID, refused, refusedToken := er.sandbox(t, autoPauseAnnotations(true), stale)
	usedID, used, usedToken := er.sandbox(t, autoPauseAnnotations(true), stale)
	recorded := func(sb *agentsv1beta1.Sandbox) time.Time {
		got := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(framework.Context(t, 30*time.Second), client.ObjectKeyFromObject(sb), got); err != nil {
			t.Fatal(err)
		}
		at, _ := activity.Parse(got.Annotations[agentsv1beta1.LastActivityAnnotation])
		return at
	}
	start := time.Now().Truncate(time.Second)
	// A flush judges Sandboxes by the router's cache, which may lag the front door's: send and
	// flush until the used sandbox's activity is written.
	framework.Eventually(t, func(ctx context.Context) error {
		if code, body := er.data(t, refusedID, "not-"+refusedToken); code != http.StatusUnauthorized {
			t.Fatalf("data-plane request with a wrong token: %d %s; want 401", code, body)
		}
		if code, body := er.data(t, usedID, usedToken); code != http.StatusOK {
			return fmt.Errorf("data-plane request: %d %s", code, body)
		}
		er.Router.Activity().Flush(ctx)
		if at := recorded(used); at.Before(start) {
			return fmt.Errorf("last activity of the used sandbox is %s, want at least %s", at, start)
		}
		return nil
	})
	if at := recorded(refused); !at.Equal(long) {
		t.Errorf("last activity of the sandbox that got only refused requests moved to %s; want %s", at, long)
	}
}
