package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// upstreamCall is one request of upstream's SDKs as they send it: no credential, the router
// headers when it goes through the router, a request ID and trace context always.
type upstreamCall struct {
	name, method, path, body string
	// routed: through the router, with the X-Sandbox-* headers (the Go SDK adds the pod IP).
	routed bool
	want   string // in the answer's body
}

// send makes c against base and returns the status and body, or an error without an answer.
func (c upstreamCall) send(ctx context.Context, base, ns, sandbox, podIP string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, c.method, base+c.path, strings.NewReader(c.body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Request-ID", "00112233445566aa")
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.routed {
		req.Header.Set("X-Sandbox-ID", sandbox)
		req.Header.Set("X-Sandbox-Namespace", ns)
		req.Header.Set("X-Sandbox-Port", upstreamLegacyPort)
		req.Header.Set("X-Sandbox-Timeout", "30.0")
		req.Header.Set("X-Sandbox-Pod-IP", podIP)
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// Upstream's calls: the router's legacy runtime API (both SDKs' default runtime) and sandboxd's
// REST API (the Go SDK's sandboxd runtime over its pod tunnel); its gRPC Execute is grpcExecute.
var (
	routedCalls = []upstreamCall{
		{name: "Run: POST /execute", method: http.MethodPost, path: "/execute", body: `{"command":"echo hello"}`, routed: true, want: `"stdout":"hello\n"`},
		{name: "Exists: GET /exists/nothing", method: http.MethodGet, path: "/exists/nothing", routed: true, want: `"exists":false`},
	}
	sandboxdCalls = []upstreamCall{
		{name: "Write: PUT /v1/files/upstream.txt", method: http.MethodPut, path: "/v1/files/upstream.txt", body: "from upstream", want: ""},
		{name: "Read: GET /v1/files/upstream.txt", method: http.MethodGet, path: "/v1/files/upstream.txt", want: "from upstream"},
		{name: "Exists: HEAD /v1/files/upstream.txt", method: http.MethodHead, path: "/v1/files/upstream.txt", want: ""},
	}
)

// grpcExecute is the Go SDK's sandboxd Run: Execute of /bin/sh -c, insecure, no metadata unless
// token is set.
func grpcExecute(ctx context.Context, addr, token string) (string, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	res, err := processv1.NewProcessServiceClient(conn).Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"/bin/sh", "-c", "echo hello"}}})
	if err != nil {
		return "", err
	}
	return string(res.GetStdout()), nil
}

// servedAll makes every call against base until each answers 2xx with what it wants.
func servedAll(t *testing.T, what, base, ns, sandbox, podIP string, calls []upstreamCall) {
	t.Helper()
	for _, c := range calls {
		framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
			code, body, err := c.send(ctx, base, ns, sandbox, podIP)
			if err != nil || code >= 300 || !strings.Contains(body, c.want) {
				return fmt.Errorf("%s %s without a token: %d %q %v, want 2xx with %q", what, c.name, code, body, err, c.want)
			}
			return nil
		})
	}
}

// refusedAll makes every call against base once and wants 401 for each.
func refusedAll(t *testing.T, ctx context.Context, what, base, ns, sandbox, podIP string, calls []upstreamCall) {
	t.Helper()
	for _, c := range calls {
		if code, body, err := c.send(ctx, base, ns, sandbox, podIP); code != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d %q %v, want 401", what, c.name, code, body, err)
		}
	}
}

// runcSandboxd is the default sandboxd Sandbox under runc (the example names gVisor, where the
// port-forward reaches nothing: see testPortForward).
func runcSandboxd(t *testing.T, name, ns string) *agentsv1beta1.Sandbox {
	sb := sandboxdSandbox(t, name, ns).Obj()
	sb.Spec.PodTemplate.Spec.RuntimeClassName = nil
	return sb
}

// testPortForward is upstream's SDKs against the default install with no code changes: their
// request shapes with no token through the API server's port-forward to the router and to
// sandboxd are served; the same by pod IP (from the host and from a Pod, labelled as a client or
// not) are refused; code in a sandbox (runc and gVisor) gets nothing on its own sandboxd, by
// loopback or by its own address, nor at the router. Then the migration profile, installed by
// `paddock dev up --profile`, serves a labelled client Pod and refuses an unlabelled one at the
// router, and its NetworkPolicy admits only labelled Pods of the namespace.
func testPortForward(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 15*time.Minute)
	c := paddockClient(t)
	ensureCredentialsKey(t, ctx)
	runc := runcSandboxd(t, "runc", ns)
	framework.MustCreate(t, ctx, c, runc)
	ipRunc := waitSandboxReady(t, c, runc)
	tokenRunc, _ := sandboxTokens(t, ctx, c, runc.Name, ns)
	routerPod, routerIP := readyPod(t, routerNamespace, map[string]string{"app.kubernetes.io/name": routerName})
	clients := map[bool]processv1.ProcessServiceClient{}
	for _, labelled := range []bool{true, false} {
		pod, token := agentPod(t, "client-"+strconv.FormatBool(labelled), ns)
		if labelled {
			pod.Labels = map[string]string{agentsv1beta1.SandboxClientLabel: "true"}
		}
		create(t, ctx, pod)
		clients[labelled] = dialSandboxd(t, waitReady(t, ns, pod.Name), token)
	}

	t.Run("through the port-forward, no token: served", func(t *testing.T) {
		ports, _ := portForwardToPod(t, ctx, suite.restConfig, routerNamespace, routerPod, 8080)
		servedAll(t, "router port-forward:", fmt.Sprintf("http://127.0.0.1:%d", ports[0]), ns, runc.Name, ipRunc, routedCalls)
		ports, _ = portForwardToPod(t, ctx, suite.restConfig, ns, runc.Name, 8080, 9090)
		servedAll(t, "sandboxd pod tunnel:", fmt.Sprintf("http://127.0.0.1:%d", ports[0]), ns, runc.Name, ipRunc, sandboxdCalls)
		framework.EventuallyWithin(t, time.Minute, func(ctx context.Context) error {
			out, err := grpcExecute(ctx, fmt.Sprintf("127.0.0.1:%d", ports[1]), "")
			if err != nil || out != "hello\n" {
				return fmt.Errorf("sandboxd pod tunnel: gRPC Execute without metadata = %q, %v; want hello", out, err)
			}
			return nil
		})
	})

	t.Run("gVisor: the port-forward to a sandbox reaches nothing; through the router it is served", func(t *testing.T) {
		requireGVisor(t)
		gv := sandboxdSandbox(t, "gvisor", ns).Obj()
		framework.MustCreate(t, ctx, c, gv)
		ipGV := waitSandboxReady(t, c, gv)
		// containerd 1.6 dials localhost in the Pod's network namespace on the host, where runsc's
		// netstack listens nowhere: the runtime reports the refused dial on the error stream and
		// no answer comes. Upstream's sandboxd pod tunnel therefore needs runc; the router's works.
		answer, runtimeErr := forwardOnce(t, ctx, ns, gv.Name, 8080, "GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
		t.Logf("GET /v1/health through the port-forward to the gVisor sandbox: answer %q; runtime: %q", answer, runtimeErr)
		if answer != "" || !strings.Contains(runtimeErr, "connect") {
			t.Errorf("port-forward to a gVisor sandbox: answer %q, runtime error %q; docs/design/credentials.md says the runtime cannot connect: update it", answer, runtimeErr)
		}
		// The same raw forward reaches the runc sandbox: the refusal above is gVisor's.
		if answer, runtimeErr := forwardOnce(t, ctx, ns, "runc", 8080, "GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"); !strings.Contains(answer, "200 OK") {
			t.Errorf("the same forward to the runc sandbox: answer %q, runtime error %q; want 200", answer, runtimeErr)
		}
		rp, _ := portForwardToPod(t, ctx, suite.restConfig, routerNamespace, routerPod, 8080)
		servedAll(t, "router port-forward to the gVisor sandbox:", fmt.Sprintf("http://127.0.0.1:%d", rp[0]), ns, gv.Name, ipGV, routedCalls[:1])
		inside(t, ctx, "code in the gVisor sandbox", runIn(dialSandboxd(t, ipGV, sandboxTokens1(t, ctx, c, gv.Name, ns))), ipGV, routerIP, ns, gv.Name)
	})

	t.Run("no port-forward, no token: refused", func(t *testing.T) {
		refusedAll(t, ctx, "router by pod IP from the host:", "http://"+net.JoinHostPort(routerIP, "8080"), ns, runc.Name, ipRunc, routedCalls)
		refusedAll(t, ctx, "sandboxd by pod IP from the host:", "http://"+net.JoinHostPort(ipRunc, sandboxdREST), ns, runc.Name, ipRunc, sandboxdCalls[:2])
		if _, err := grpcExecute(ctx, net.JoinHostPort(ipRunc, sandboxdGRPC), ""); status.Code(err) != codes.Unauthenticated {
			t.Errorf("sandboxd gRPC by pod IP from the host without metadata: %v, want Unauthenticated", err)
		}
		for labelled, procs := range clients {
			from := fmt.Sprintf("a Pod (client label %v)", labelled)
			for _, p := range []probe{
				{target: "router", method: http.MethodPost, url: "http://" + net.JoinHostPort(routerIP, "8080") + "/execute", body: `{"command":"id"}`,
					header: map[string]string{"X-Sandbox-ID": runc.Name, "X-Sandbox-Namespace": ns, "X-Sandbox-Port": upstreamLegacyPort}},
				{target: "sandbox legacy 8888", method: http.MethodPost, url: "http://" + net.JoinHostPort(ipRunc, upstreamLegacyPort) + "/execute", body: `{"command":"id"}`},
			} {
				if o := sendFromShell(runIn(procs))(ctx, p); o.status != http.StatusUnauthorized {
					t.Errorf("%s to the %s by pod IP without a token: %s, want 401", from, p.target, o)
				}
			}
		}
		inside(t, ctx, "code in the runc sandbox", runIn(dialSandboxd(t, ipRunc, tokenRunc)), ipRunc, routerIP, ns, runc.Name)
	})

	t.Run("migration profile: labelled client Pods without a token", func(t *testing.T) {
		testMigrationProfile(t, ctx, c, ns, clients)
	})
}

// forwardOnce opens one port-forward stream pair to port of pod through the API server, writes
// request on the data stream and returns what came back on it and on the error stream, where
// the container runtime reports a dial it could not make inside the Pod.
func forwardOnce(t *testing.T, ctx context.Context, ns, pod string, port int, request string) (answer, runtimeErr string) {
	t.Helper()
	transport, upgrader, err := spdy.RoundTripperFor(suite.restConfig)
	if err != nil {
		t.Fatal(err)
	}
	target := suite.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	conn, _, err := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, target).Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		t.Fatalf("port-forward to %s/%s: %v", ns, pod, err)
	}
	defer conn.Close()
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	_ = errStream.Close()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(data, request)
	type read struct{ data, errs []byte }
	done := make(chan read, 1)
	go func() {
		d, _ := io.ReadAll(data)
		e, _ := io.ReadAll(errStream)
		done <- read{d, e}
	}()
	select {
	case r := <-done:
		return string(r.data), string(r.errs)
	case <-ctx.Done():
		t.Fatalf("port-forward to %s/%s: no answer and no error: %v", ns, pod, ctx.Err())
	}
	return "", ""
}

// sandboxTokens1 is the sandbox token alone.
func sandboxTokens1(t *testing.T, ctx context.Context, c client.Client, name, ns string) string {
	token, _ := sandboxTokens(t, ctx, c, name, ns)
	return token
}

// inside has code in a sandbox call its own sandboxd without a token, by loopback and by its
// own pod IP, on the REST and legacy ports, and the router without a token: every one 401.
func inside(t *testing.T, ctx context.Context, who string, run func(context.Context, string) (string, error), ownIP, routerIP, ns, sandbox string) {
	t.Helper()
	for _, p := range selfProbes(ownIP) {
		if o := sendFromShell(run)(ctx, p); o.status != http.StatusUnauthorized {
			t.Errorf("%s to %s without a token: %s, want 401", who, p.target, o)
		}
	}
	p := probe{target: "router", method: http.MethodGet, url: "http://" + net.JoinHostPort(routerIP, "8080") + "/v1/files/",
		header: map[string]string{"X-Sandbox-ID": sandbox, "X-Sandbox-Namespace": ns, "X-Sandbox-Port": sandboxdREST}}
	if o := sendFromShell(run)(ctx, p); o.status != http.StatusUnauthorized {
		t.Errorf("%s to the router without a token: %s, want 401", who, o)
	}
}

// selfProbes are the calls code in a sandbox makes to its own sandboxd without a token: over
// loopback, where the port-forward arrives too, and over its own pod IP.
func selfProbes(ownIP string) []probe {
	var out []probe
	for _, host := range []string{"127.0.0.1", ownIP} {
		out = append(out,
			probe{target: "its own sandboxd REST 8080 at " + host, method: http.MethodGet, url: "http://" + net.JoinHostPort(host, sandboxdREST) + "/v1/files/"},
			probe{target: "its own sandboxd legacy 8888 at " + host, method: http.MethodPost, url: "http://" + net.JoinHostPort(host, upstreamLegacyPort) + "/execute", body: `{"command":"id"}`})
	}
	return out
}

// readyPod waits until the Pods with the labels in ns are one Ready Pod, none terminating (an
// install that just changed drains its old Pods), and returns its name and IP.
func readyPod(t *testing.T, ns string, labels map[string]string) (name, ip string) {
	t.Helper()
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error {
		pods, err := suite.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: labels})})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d Pods with %v in %s, want one (old ones still draining?)", len(pods.Items), labels, ns)
		}
		p := pods.Items[0]
		ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		if !ready || p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			return fmt.Errorf("Pod %s/%s is not Ready, or terminating, or has no IP", ns, p.Name)
		}
		name, ip = p.Name, p.Status.PodIP
		return nil
	})
	return name, ip
}

// devUp runs `paddock dev up` on the suite's cluster with extra flags.
func devUp(t *testing.T, ctx context.Context, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, suite.paddock, append([]string{"dev", "up", "--state-dir=" + suite.stateDir, fmt.Sprintf("--kwok-nodes=%d", *kwokNodesFlag)}, args...)...)
	cmd.Dir = framework.RepoRoot()
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("paddock dev up %v: %v\n%s", args, err, out.String())
	}
	t.Logf("paddock dev up %v:\n%s", args, out.String())
}

// testMigrationProfile installs the migration profile over the default install and puts the
// default back afterwards. The dev cluster enforces no NetworkPolicy, so what keeps unlabelled
// Pods from a sandbox's pod IP is shown as the policy object, not as a refusal.
func testMigrationProfile(t *testing.T, ctx context.Context, c client.Client, ns string, clients map[bool]processv1.ProcessServiceClient) {
	if !suite.owned {
		t.Skip("installs a profile with paddock dev up; only on the cluster the tests brought up")
	}
	t.Cleanup(func() {
		ctx := framework.Context(t, 10*time.Minute)
		devUp(t, ctx, "--profile="+devcluster.ProfileDefault)
		for _, name := range []string{"paddock-router-client-pods"} {
			_ = suite.client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
			_ = suite.client.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
		}
		// The next tests look the router up by its Pod: leave only the default's.
		readyPod(t, routerNamespace, map[string]string{"app.kubernetes.io/name": "paddock-controller"})
		readyPod(t, routerNamespace, map[string]string{"app.kubernetes.io/name": routerName})
	})
	devUp(t, ctx, "--profile="+devcluster.ProfileUpstreamUnauthenticatedMigration)
	// The controller that makes the next Sandbox must be the profile's.
	readyPod(t, routerNamespace, map[string]string{"app.kubernetes.io/name": "paddock-controller"})
	_, routerIP := readyPod(t, routerNamespace, map[string]string{"app.kubernetes.io/name": routerName})

	// A Sandbox made under the profile: sandboxd serves the pod network without a token.
	migrated := runcSandboxd(t, "migrated", ns)
	framework.MustCreate(t, ctx, c, migrated)
	ip := waitSandboxReady(t, c, migrated)
	pod, err := suite.client.CoreV1().Pods(ns).Get(ctx, migrated.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pod.Spec.Containers[0].Env, func(e corev1.EnvVar) bool {
		return e.Name == sandboxd.AllowUnauthenticatedNetworkEnv && e.Value == "true"
	}) {
		t.Errorf("a sandbox made under the profile lacks %s=true: %+v", sandboxd.AllowUnauthenticatedNetworkEnv, pod.Spec.Containers[0].Env)
	}

	routed := probe{method: http.MethodPost, url: "http://" + net.JoinHostPort(routerIP, "8080") + "/execute", body: `{"command":"echo hello"}`,
		header: map[string]string{"X-Sandbox-ID": migrated.Name, "X-Sandbox-Namespace": ns, "X-Sandbox-Port": upstreamLegacyPort}}
	direct := probe{method: http.MethodPost, url: "http://" + net.JoinHostPort(ip, upstreamLegacyPort) + "/execute", body: `{"command":"echo hello"}`}
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		if o := sendFromShell(runIn(clients[true]))(ctx, routed); o.status != http.StatusOK || !strings.Contains(o.body, "hello") {
			return fmt.Errorf("labelled client Pod to the router without a token: %s, want 200", o)
		}
		return nil
	})
	if o := sendFromShell(runIn(clients[false]))(ctx, routed); o.status != http.StatusUnauthorized {
		t.Errorf("unlabelled Pod to the router without a token: %s, want 401 (the router checks the label itself)", o)
	}
	// Polled: once a 200 came without the command's output (not reproduced); the body says.
	framework.EventuallyWithin(t, time.Minute, func(ctx context.Context) error {
		if o := sendFromShell(runIn(clients[true]))(ctx, direct); o.status != http.StatusOK || !strings.Contains(o.body, "hello") {
			return fmt.Errorf("labelled client Pod to sandboxd by pod IP without a token: %s %q, want 200 with hello", o, o.body)
		}
		return nil
	})
	// Only NetworkPolicy stops an unlabelled Pod here; this cluster does not enforce it.
	o := sendFromShell(runIn(clients[false]))(ctx, direct)
	t.Logf("unlabelled Pod to sandboxd by pod IP without a token, on a cluster that enforces no NetworkPolicy: %s", o)

	// Code in the sandbox still gets nothing on its own sandboxd.
	inside(t, ctx, "code in a sandbox under the profile", runIn(dialSandboxd(t, ip, sandboxTokens1(t, ctx, c, migrated.Name, ns))), ip, routerIP, ns, migrated.Name)

	// The managed policy admits the namespace's labelled Pods besides the router and the controller.
	tpl := builder.MakeTemplate("profiled", ns).Obj()
	framework.MustCreate(t, ctx, c, tpl)
	framework.EventuallyWithin(t, time.Minute, func(ctx context.Context) error {
		np := &networkingv1.NetworkPolicy{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandboxtemplate.PolicyName(tpl.Name)}, np); err != nil {
			return err
		}
		if len(np.Spec.Ingress) != 1 {
			return fmt.Errorf("ingress %+v, want one rule", np.Spec.Ingress)
		}
		for _, peer := range np.Spec.Ingress[0].From {
			if peer.NamespaceSelector == nil && peer.PodSelector != nil && peer.PodSelector.MatchLabels[agentsv1beta1.SandboxClientLabel] == "true" {
				return nil
			}
		}
		return fmt.Errorf("ingress peers %+v admit no labelled client Pod of the namespace", np.Spec.Ingress[0].From)
	})
}
