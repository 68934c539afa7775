package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// Upstream's names: the router Service both SDKs look for, the Python SDK's default namespace
// for it, and the legacy runtime port their Run goes to.
const (
	upstreamRouterService   = "sandbox-router-svc"
	upstreamRouterNamespace = "agent-sandbox-system"
	upstreamLegacyPort      = "8888"
)

// testUpstreamDefaults makes the calls of upstream's SDKs in their default connection modes,
// with clients of our own, against one claimed sandboxd sandbox, each with a Kubernetes token:
//   - Go: a native port-forward through the API server to a pod behind sandbox-router-svc in the
//     claim's own namespace (the per-namespace router, config/namespace-router);
//   - Python (stdlib): `kubectl port-forward svc/sandbox-router-svc -n agent-sandbox-system`.
//
// Both run POST /execute on the legacy port with the X-Sandbox-* headers.
func testUpstreamDefaults(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 8*time.Minute)
	c := paddockClient(t)
	applyExample(t, ctx, c, ns, "sandboxd-template.yaml")
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("sandboxd", ns, "sandboxd").Replicas(1).Obj())
	paddock, err := sdk.New(suite.restConfig, sdk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := paddock.Claim(ctx, sdk.ClaimOptions{WarmPool: "sandboxd", Namespace: ns})
	if err != nil {
		t.Fatalf("claiming a sandbox: %v", err)
	}
	t.Cleanup(func() { _ = claimed.Release(context.Background()) })
	sandbox := claimed.SandboxName()
	ensureCredentialsKey(t, ctx)
	token := routerClientToken(t, ctx, ns)
	installed := installedRouter(t, ctx)
	admitUpstreamRouters(t, ctx, ns)

	t.Run("Go: port-forward to sandbox-router-svc in the claim's namespace", func(t *testing.T) {
		installNamespaceRouter(t, ctx, c, ns, installed)
		dumpPodsOnFailure(t, ns, map[string]string{"app.kubernetes.io/name": routerName})
		base := portForwardToService(t, ctx, ns, upstreamRouterService, 8080)
		framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
			return expectExecute(ctx, base, ns, sandbox, token)
		})
		// Upstream's SDK sends no token: the API server authorized the port-forward, and the
		// router serves it (--accept-port-forward).
		if err := expectExecute(ctx, base, ns, sandbox, ""); err != nil {
			t.Errorf("without a token through the port-forward: %v", err)
		}
	})
	t.Run("Python: kubectl port-forward svc/sandbox-router-svc -n agent-sandbox-system", func(t *testing.T) {
		dumpPodsOnFailure(t, upstreamRouterNamespace, map[string]string{"app.kubernetes.io/name": routerName})
		installAgentSandboxSystemRouter(t, ctx, installed)
		kubectl := kubectlBinary(t)
		// With a token, and as upstream's SDK sends it: without one.
		for _, routerToken := range []string{token, ""} {
			runPythonClient(t, kubectl, ns, sandbox, routerToken)
		}
	})
}

// admitUpstreamRouters lets the routers of upstream's layouts (one in the claim's namespace, one in
// agent-sandbox-system) reach the namespace's sandboxes: the managed NetworkPolicy admits only
// Paddock's own router, and the local cluster enforces NetworkPolicy. A user of those layouts
// adds the same policy (NetworkPolicies add up).
func admitUpstreamRouters(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	routers := &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": routerName}}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "upstream-routers", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: routers},
				{PodSelector: routers, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: upstreamRouterNamespace}}},
			}}},
		},
	}
	if _, err := suite.client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runPythonClient runs testdata/upstream-python-client against sandbox until it prints echo's
// answer; routerToken "" sends no Authorization, as upstream's SDK.
func runPythonClient(t *testing.T, kubectl, ns, sandbox, routerToken string) {
	t.Helper()
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, "python3", filepath.Join(framework.RepoRoot(), "test/e2e/cluster/testdata/upstream-python-client/run.py"),
			"--namespace", ns, "--sandbox", sandbox, "--command", "echo hello")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.kubeconfig, "KUBECTL="+kubectl, "SANDBOX_ROUTER_TOKEN="+routerToken)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("python client: %w\n%s", err, stderr.String())
		}
		var res struct {
			Stdout   string `json:"stdout"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal(out, &res); err != nil || res.Stdout != "hello\n" || res.ExitCode != 0 {
			return fmt.Errorf("python client (token %v) printed %q (%v); want stdout \"hello\\n\", exit code 0\n%s", routerToken != "", out, err, stderr.String())
		}
		return nil
	})
}

// expectExecute runs echo through the router at base and checks the legacy runtime's answer.
func expectExecute(ctx context.Context, base, ns, sandbox, token string) error {
	req, err := executeRequest(ctx, base, ns, sandbox, token)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &res); err != nil || resp.StatusCode != http.StatusOK || res.Stdout != "hello\n" || res.ExitCode != 0 {
		return fmt.Errorf("POST /execute for %s/%s = %d %s; want 200 with stdout \"hello\\n\", exit code 0", ns, sandbox, resp.StatusCode, body)
	}
	return nil
}

// executeRequest is the Go SDK's Run on the legacy runtime: POST execute with the router headers.
func executeRequest(ctx context.Context, base, ns, sandbox, token string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/execute", strings.NewReader(`{"command":"echo hello"}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Sandbox-ID", sandbox)
	req.Header.Set("X-Sandbox-Namespace", ns)
	req.Header.Set("X-Sandbox-Port", upstreamLegacyPort)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, nil
}

// portForwardToService does what upstream's Go SDK tunnel does: the first ready endpoint with a
// target pod among the EndpointSlices of the Service, a SPDY port-forward to it through the API
// server on a random local port, and the local base URL.
func portForwardToService(t *testing.T, ctx context.Context, ns, service string, port int) string {
	t.Helper()
	var pod string
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		slices, err := suite.client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return err
		}
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
					pod = ep.TargetRef.Name
					return nil
				}
			}
		}
		return fmt.Errorf("no ready endpoint with a pod among %d EndpointSlices of %s/%s", len(slices.Items), ns, service)
	})
	ports, _ := portForwardToPod(t, ctx, suite.restConfig, ns, pod, port)
	return fmt.Sprintf("http://127.0.0.1:%d", ports[0])
}

// portForwardToPod opens a SPDY port-forward through the API server, as cfg's user, to ports of
// pod, on random local ports of 127.0.0.1, until the test ends. It returns the local ports in
// order and what the forwarder reported on its error stream so far (a failed dial inside the Pod
// shows there). The API server must allow the forward: a refusal fails the test.
func portForwardToPod(t *testing.T, ctx context.Context, cfg *rest.Config, ns, pod string, ports ...int) ([]int, func() string) {
	t.Helper()
	fw, errOut, done, err := startPortForward(ctx, cfg, ns, pod, ports...)
	if err != nil {
		t.Fatalf("port-forward to pod %s/%s: %v", ns, pod, err)
	}
	t.Cleanup(func() {
		fw.stop()
		if err := <-done; err != nil {
			t.Logf("port-forward to pod %s/%s ended: %v", ns, pod, err)
		}
	})
	got, err := fw.GetPorts()
	if err != nil || len(got) != len(ports) {
		t.Fatalf("port-forward ports %v: %v", got, err)
	}
	var local []int
	for _, p := range got {
		local = append(local, int(p.Local))
	}
	return local, errOut.String
}

// forwarder is a running port-forward and the way to stop it.
type forwarder struct {
	*portforward.PortForwarder
	stop func()
}

// startPortForward starts a port-forward and waits until it listens or fails (an API server's
// refusal is such a failure).
func startPortForward(ctx context.Context, cfg *rest.Config, ns, pod string, ports ...int) (*forwarder, *syncBuffer, chan error, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	target := suite.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, target)
	stop, ready := make(chan struct{}), make(chan struct{})
	errOut := &syncBuffer{}
	var specs []string
	for _, p := range ports {
		specs = append(specs, fmt.Sprintf("0:%d", p))
	}
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, specs, stop, ready, io.Discard, errOut)
	if err != nil {
		return nil, nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	f := &forwarder{PortForwarder: fw, stop: sync.OnceFunc(func() { close(stop) })}
	select {
	case <-ready:
		return f, errOut, done, nil
	case err := <-done:
		return nil, nil, nil, fmt.Errorf("%w %s", err, errOut.String())
	case <-ctx.Done():
		f.stop()
		return nil, nil, nil, fmt.Errorf("not ready: %w", ctx.Err())
	}
}

// syncBuffer is a bytes.Buffer the forwarder writes from its goroutines while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// installedRouter is the router container `paddock dev up` installed: the image it built and
// the environment that points the in-cluster client at the API server (the dev cluster has no
// kube-proxy, so the kubernetes Service's ClusterIP leads nowhere).
func installedRouter(t *testing.T, ctx context.Context) corev1.Container {
	t.Helper()
	d, err := suite.client.AppsV1().Deployments(routerNamespace).Get(ctx, routerName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the router installed by dev up: %v", err)
	}
	return d.Spec.Template.Spec.Containers[0]
}

// dumpPodsOnFailure logs the status and log tail of the pods with the labels in ns if the test
// fails, so a router that never turns Ready says why.
func dumpPodsOnFailure(t *testing.T, ns string, labels map[string]string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		pods, err := suite.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: labels})})
		if err != nil {
			t.Logf("listing pods in %s: %v", ns, err)
			return
		}
		for _, p := range pods.Items {
			status, _ := json.Marshal(p.Status)
			t.Logf("pod %s/%s status: %s", ns, p.Name, status)
			logs, err := suite.client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr[int64](40)}).DoRaw(ctx)
			t.Logf("pod %s/%s logs (%v):\n%s", ns, p.Name, err, logs)
		}
	})
}

// installNamespaceRouter renders config/namespace-router into ns through the overlay
// docs/compatibility.md shows (namespace and the ClusterRoleBinding's name), with the dev image
// and API server address.
func installNamespaceRouter(t *testing.T, ctx context.Context, c client.Client, ns string, installed corev1.Container) {
	t.Helper()
	objs, err := framework.BuildNamespaceRouter(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			ctr := containers[0].(map[string]any)
			ctr["image"] = installed.Image
			ctr["imagePullPolicy"] = string(installed.ImagePullPolicy)
			env, _, _ := unstructured.NestedSlice(ctr, "env")
			for _, e := range installed.Env {
				if strings.HasPrefix(e.Name, "KUBERNETES_SERVICE_") {
					env = append(env, map[string]any{"name": e.Name, "value": e.Value})
				}
			}
			ctr["env"] = env
			_ = unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
		}
		if u.GetNamespace() == "" {
			obj := u.DeepCopy()
			t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s of the per-namespace router: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// installAgentSandboxSystemRouter runs a router in agent-sandbox-system behind
// sandbox-router-svc, where upstream's Python SDK looks by default, as the agent-sandbox-system
// profile does, next to the installation of paddock-system: the installed router's container
// with its ClusterRole and the paddock-system credentials key (the profile keeps the key in its
// own namespace; a second controller is not installed so as not to disturb other tests).
func installAgentSandboxSystemRouter(t *testing.T, ctx context.Context, installed corev1.Container) {
	t.Helper()
	cs := suite.client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upstreamRouterNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s (is the agent-sandbox-system profile installed on this cluster?): %v", ns.Name, err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	framework.Eventually(t, func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns.Name}
	for name, role := range map[string]string{"e2e-agent-sandbox-system-router": routerName, "e2e-agent-sandbox-system-router-auth": "system:auth-delegator"} {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: []rbacv1.Subject{sa}}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	keyReader := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-agent-sandbox-system-router", Namespace: routerNamespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: routerName + "-credentials"},
		Subjects: []rbacv1.Subject{sa}}
	if _, err := cs.RbacV1().RoleBindings(routerNamespace).Create(ctx, keyReader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().RoleBindings(routerNamespace).Delete(context.Background(), keyReader.Name, metav1.DeleteOptions{})
	})
	labels := map[string]string{"app.kubernetes.io/name": routerName, "app": routerName}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "paddock-router", Namespace: ns.Name, Labels: labels},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr[int64](1), Containers: []corev1.Container{{
			Name: "router", Image: installed.Image, ImagePullPolicy: installed.ImagePullPolicy, Env: installed.Env,
			Args: []string{"--http-bind-address=:8080", "--health-probe-bind-address=:8081", "--metrics-bind-address=:9090",
				"--shutdown-delay=0s", "--authz-mode=tokenreview", "--credentials-secret=" + routerNamespace + "/" + credentials.KeySecretName},
			Ports:          []corev1.ContainerPort{{Name: "proxy", ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8081)}}, PeriodSeconds: 1},
		}}},
	}
	create(t, ctx, pod)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: upstreamRouterService, Namespace: ns.Name},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "proxy", Port: 8080, TargetPort: intstr.FromString("proxy")}}}}
	if _, err := cs.CoreV1().Services(ns.Name).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyPodIP(t, ns.Name, labels)
}

// kubectlBinary is the kubectl hack/build-k8s.sh builds (make e2e-deps builds it; cached after).
func kubectlBinary(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(framework.RepoRoot(), "hack", "build-k8s.sh"), "kubectl").Output()
	if err != nil {
		t.Fatalf("hack/build-k8s.sh kubectl: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "kubectl")
}
