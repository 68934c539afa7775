package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/internal/router/scopedtoken"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/framework"
)

// The router installed by `paddock dev up` (dist/paddock-router.yaml).
const (
	routerNamespace = "paddock-system"
	routerName      = "paddock-router"
)

// testRouter sends requests through paddock-router to two sandboxd sandboxes. The dev cluster
// runs no kube-proxy, so the host reaches the router pod by its IP, as clients in the cluster
// reach it through sandbox-router-svc.
func testRouter(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 6*time.Minute)
	c := paddockClient(t)
	alpha, beta := sandboxdSandbox(t, "alpha", ns).Obj(), sandboxdSandbox(t, "beta", ns).Obj()
	for _, sb := range []client.Object{alpha, beta, sandboxdSandbox(t, "paused", ns).Suspended().Obj()} {
		framework.MustCreate(t, ctx, c, sb)
	}
	waitSandboxReady(t, c, alpha)
	waitSandboxReady(t, c, beta)
	router := "http://" + net.JoinHostPort(readyPodIP(t, routerNamespace, map[string]string{"app.kubernetes.io/name": routerName}), "8080")
	ensureCredentialsKey(t, ctx)
	token := routerClientToken(t, ctx, ns)

	t.Run("requests land on the sandbox the headers name", func(t *testing.T) {
		for _, name := range []string{"alpha", "beta"} {
			// The router's informer may see Ready a moment after the test does.
			framework.Eventually(t, func(ctx context.Context) error {
				return expectSandboxName(ctx, router, ns, name, token)
			})
		}
	})
	t.Run("the installed router fails closed", func(t *testing.T) {
		expectDetail(t, ctx, router, ns, "alpha", "", http.StatusUnauthorized, "send a Kubernetes token")
	})
	t.Run("the SDK runs a command through the router on the legacy port", func(t *testing.T) {
		rt, err := sdk.NewRuntime(sdk.Endpoint{URL: router, Sandbox: "beta", Namespace: ns, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		res, err := rt.Run(ctx, "sh -c 'echo $SANDBOX_NAME'")
		if err != nil || res.Stdout != "beta\n" || res.ExitCode != 0 {
			t.Errorf("Run through the router = %+v, %v; want stdout \"beta\\n\", exit code 0", res, err)
		}
	})
	t.Run("an unknown and a suspended sandbox get JSON errors", func(t *testing.T) {
		expectDetail(t, ctx, router, ns, "no-such-sandbox", token, http.StatusNotFound, `"no-such-sandbox"`)
		expectDetail(t, ctx, router, ns, "paused", token, http.StatusServiceUnavailable, "is suspended")
	})
	t.Run("an exec stream flows through the router before the command ends", func(t *testing.T) {
		testRouterStream(t, ctx, router, ns, "alpha", token)
	})
	t.Run("a scoped token opens its sandbox and no other", func(t *testing.T) {
		keys := scopedTokenRouter(t, ctx, ns)
		scoped := "http://" + net.JoinHostPort(readyPodIP(t, ns, map[string]string{"app": "scoped-router"}), "8080")
		token, err := keys.Mint(ns, "alpha", 10*time.Minute, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, func(ctx context.Context) error { return expectSandboxName(ctx, scoped, ns, "alpha", token) })
		expectDetail(t, ctx, scoped, ns, "beta", token, http.StatusForbidden, "")
		expectDetail(t, ctx, scoped, ns, "alpha", "", http.StatusUnauthorized, "")
	})
}

// routedRequest builds a request to sandboxd's REST port of ns/name through the router at base.
func routedRequest(ctx context.Context, method, base, path, ns, name, token string, body string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Sandbox-ID", name)
	req.Header.Set("X-Sandbox-Namespace", ns)
	req.Header.Set("X-Sandbox-Port", sandboxdREST)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, nil
}

// expectSandboxName asks the sandbox behind the router for its metadata: SANDBOX_NAME comes
// from the pod's own name, so it proves which sandbox answered.
func expectSandboxName(ctx context.Context, router, ns, name, token string) error {
	req, err := routedRequest(ctx, http.MethodGet, router, "/v1/metadata", ns, name, token, "")
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var md struct{ Env map[string]string }
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v1/metadata via the router for %s = %d, decode error %v", name, resp.StatusCode, err)
	}
	if got := md.Env["SANDBOX_NAME"]; got != name {
		return fmt.Errorf("request for sandbox %s answered by sandbox %q", name, got)
	}
	return nil
}

// expectDetail checks the router's own error: the status and a JSON {"detail"} that says what
// is wrong (containing want).
func expectDetail(t *testing.T, ctx context.Context, router, ns, name, token string, wantStatus int, want string) {
	t.Helper()
	req, err := routedRequest(ctx, http.MethodGet, router, "/v1/health", ns, name, token, "")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Detail string }
	derr := json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != wantStatus || resp.Header.Get("Content-Type") != "application/json" || derr != nil ||
		body.Detail == "" || !strings.Contains(body.Detail, want) {
		t.Errorf("request for %s/%s = %d %s detail %q (decode error %v); want %d application/json with a detail containing %q",
			ns, name, resp.StatusCode, resp.Header.Get("Content-Type"), body.Detail, derr, wantStatus, want)
	}
}

// testRouterStream runs a command that prints, then blocks on stdin, through the router's
// HTTP/1.1 hop: the first chunk arriving proves the stream is not buffered until the end.
func testRouterStream(t *testing.T, ctx context.Context, router, ns, name, token string) {
	req, err := routedRequest(ctx, http.MethodPost, router, "/v1/processes", ns, name, token,
		`{"config":{"command":["sh","-c","echo first; read line; echo \"got $line\""]}}`)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/processes via the router = %d", resp.StatusCode)
	}
	events := bufio.NewScanner(resp.Body)
	next := func() *processv1.StartResponse {
		t.Helper()
		if !events.Scan() {
			t.Fatalf("event stream ended early: %v", events.Err())
		}
		ev := &processv1.StartResponse{}
		if err := protojson.Unmarshal(events.Bytes(), ev); err != nil {
			t.Fatalf("event %q: %v", events.Text(), err)
		}
		return ev
	}
	id := next().GetInit().GetProcessId()
	if got := string(next().GetStdout()); got != "first\n" {
		t.Fatalf("first output chunk = %q, want \"first\\n\" while the process waits on stdin", got)
	}
	stdin, err := routedRequest(ctx, http.MethodPost, router, fmt.Sprintf("/v1/processes/%d/stdin?eof=true", id), ns, name, token, "via router\n")
	if err != nil {
		t.Fatal(err)
	}
	sresp, err := http.DefaultClient.Do(stdin)
	if err != nil {
		t.Fatal(err)
	}
	sresp.Body.Close()
	if sresp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST stdin via the router = %d, want 204", sresp.StatusCode)
	}
	var out strings.Builder
	for {
		ev := next()
		out.Write(ev.GetStdout())
		if exit := ev.GetExit(); exit != nil {
			if diff := cmp.Diff([]any{"got via router\n", int32(0)}, []any{out.String(), exit.GetExitCode()}); diff != "" {
				t.Errorf("rest of the stream: stdout, exit code (-want +got):\n%s", diff)
			}
			return
		}
	}
}

// routerClientToken returns a token of a ServiceAccount in ns that may reach every sandbox of
// ns through the router (create on sandboxes/proxy), as docs/security.md tells users to grant.
func routerClientToken(t *testing.T, ctx context.Context, ns string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "router-client", Namespace: ns}}
	if _, err := suite.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reach-sandboxes", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{authz.SandboxAccess.Group}, Resources: []string{authz.SandboxAccess.Resource + "/" + authz.SandboxAccess.Subresource},
		Verbs: []string{authz.SandboxAccess.Verb}}}}
	if _, err := suite.client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "router-client", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}}
	if _, err := suite.client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := suite.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// ensureCredentialsKey makes sure the key Secret the installed router derives sandbox tokens from
// exists. The controller creates it at start; a controller that predates the credential model
// does not, so the test supplies one and the controller keeps it.
func ensureCredentialsKey(t *testing.T, ctx context.Context) {
	t.Helper()
	key, err := credentials.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: credentials.KeySecretName, Namespace: routerNamespace},
		Data: map[string][]byte{credentials.KeySecretDataKey: key}}
	if _, err := suite.client.CoreV1().Secrets(routerNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// scopedTokenRouter runs a second router in ns, in scoped-token mode with a fresh key, made
// from the installed router's container (same image and API server address), and returns the
// key. It watches only ns, through a RoleBinding to the router's ClusterRole.
func scopedTokenRouter(t *testing.T, ctx context.Context, ns string) scopedtoken.Keys {
	t.Helper()
	raw := make([]byte, 48)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString(raw)
	keys, err := scopedtoken.ParseKeys([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	installed, err := suite.client.AppsV1().Deployments(routerNamespace).Get(ctx, routerName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the router installed by dev up: %v", err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "scoped-router-keys", Namespace: ns}, StringData: map[string]string{"keys": key}}
	if _, err := suite.client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scoped-router", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: routerName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}},
	}
	if _, err := suite.client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// It presents each sandbox's own token, as the installed router does: sandboxd answers
	// nothing else. The key Secret is read through the installed router's Role.
	keyReader := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scoped-router-" + ns, Namespace: routerNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: routerName + "-credentials"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}},
	}
	if _, err := suite.client.RbacV1().RoleBindings(routerNamespace).Create(ctx, keyReader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.client.RbacV1().RoleBindings(routerNamespace).Delete(context.Background(), keyReader.Name, metav1.DeleteOptions{})
	})
	spec := installed.Spec.Template.Spec.DeepCopy()
	spec.ServiceAccountName, spec.DeprecatedServiceAccount = "", ""
	spec.TopologySpreadConstraints = nil
	spec.TerminationGracePeriodSeconds = ptr[int64](1)
	ctr := &spec.Containers[0]
	ctr.Args = []string{"--http-bind-address=:8080", "--health-probe-bind-address=:8081", "--metrics-bind-address=:9090",
		"--sandbox-namespaces=" + ns, "--authz-mode=scoped-token", "--authz-scoped-token-secret-file=/etc/scoped-router/keys",
		"--shutdown-delay=0s", "--metrics-secure=false", "--credentials-secret=" + routerNamespace + "/" + credentials.KeySecretName}
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "keys", MountPath: "/etc/scoped-router", ReadOnly: true})
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "keys", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret.Name}}})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "scoped-router", Namespace: ns, Labels: map[string]string{"app": "scoped-router"}},
		Spec:       *spec,
	}
	create(t, ctx, pod)
	return keys
}

// readyPodIP waits for a Ready pod with the labels in ns and returns its IP.
func readyPodIP(t *testing.T, ns string, labels map[string]string) string {
	t.Helper()
	var ip string
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		pods, err := suite.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: labels})})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
					ip = p.Status.PodIP
					return nil
				}
			}
		}
		return fmt.Errorf("no Ready pod with labels %v in %s among %d", labels, ns, len(pods.Items))
	})
	return ip
}
