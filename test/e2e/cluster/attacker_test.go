package cluster

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// Addresses of the dev cluster's node components (internal/devcluster.Config's defaults).
const (
	kubeletPort         = "10250"
	kubeletReadOnlyPort = "10255"
	apiServerPort       = "6443"
	kwokPort            = "10247"
	controllerMetrics   = "8080"
	routerMetrics       = "9090"
	// registryPort is the dev registry's: read-only behind a password on the node's address.
	registryPort = "5001"
	// e2bPort is E2B's envd port; sandboxd serves it only where a template declares it.
	e2bPort = "49983"
)

// probe is one request an attacker sends: plain HTTP or HTTPS to url, with headers and an
// optional body.
type probe struct {
	target string // what it tries to reach, for the table
	method string
	url    string
	header map[string]string
	body   string
	// host, when set, is the request's Host instead of the URL's.
	host string
	// secrets must not appear anywhere in the answer (a token, another tenant's sandbox ID).
	secrets []string
	// listOK: a 200 holds when it shows none of the secrets (a list of the caller's own).
	listOK bool
	// e2b: the E2B data plane's refusals hold too: 400 for a request naming no sandbox, 502
	// with "not found" for a sandbox it does not know (E2B's own answer, which the SDK reads).
	e2b bool
}

// outcome is what came back: a status, or no connection at all.
type outcome struct {
	status int
	detail string
	// body is the start of the answer, for judging what it gives away.
	body string
}

// judge reports whether p's attempt held, given what came back.
func (p probe) judge(o outcome) bool {
	for _, s := range p.secrets {
		if s != "" && strings.Contains(o.body, s) {
			return false
		}
	}
	switch {
	case o.held(), p.listOK && o.status == http.StatusOK:
		return true
	case p.e2b:
		return o.status == http.StatusBadRequest || o.status == http.StatusBadGateway && strings.Contains(o.body, "not found")
	}
	return false
}

// held reports whether the attempt failed as the defaults promise: refused at the transport, or
// answered with a status that names a refusal.
func (o outcome) held() bool {
	switch o.status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable:
		return true
	case 0:
		return noConnection.MatchString(o.detail)
	}
	return false
}

func (o outcome) String() string {
	if o.status == 0 {
		return o.detail
	}
	return fmt.Sprintf("%d %s", o.status, o.detail)
}

// noConnection matches the errors of a dial that nothing answered (Go's, nc's and curl's wording).
var noConnection = regexp.MustCompile(`(?i)connection refused|can't connect|couldn't connect|i/o timeout|timed out|no route to host|connection reset|EOF`)

// vantage is a place an attacker sends probes from.
type vantage struct {
	name string
	send func(ctx context.Context, p probe) outcome
	// run runs a shell script there, for attempts that are not HTTP.
	run func(ctx context.Context, script string) (string, error)
}

// attempt is one row of the table.
type attempt struct {
	from, what, result string
	held               bool
}

// testAttacker plays an attacker on the installed defaults from three places: the host without
// credentials, a pod in another namespace, and code inside sandbox A (through sandboxd's exec).
// Each tries to reach sandbox B, an unclaimed warm member, the controller, the router's metrics,
// the kubelet, the API server and KWOK, by pod IP and through the router with no token, a wrong
// token and forged headers; reads every credential it can find; and tries to bind a warm member.
// Every attempt must fail with a clear status; the table of attempts is logged either way.
func testAttacker(t *testing.T) {
	ns := namespace(t)
	outside := namespace(t)
	ctx := framework.Context(t, 10*time.Minute)
	c := paddockClient(t)

	applyExample(t, ctx, c, ns, "sandboxd-template.yaml")
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("pool", ns, "sandboxd").Replicas(1).Obj())
	a, b := sandboxdSandbox(t, "a", ns).Obj(), sandboxdSandbox(t, "b", ns).Obj()
	// r runs on runc, where the runtime's files under /proc/gvisor do not exist.
	r := sandboxdSandbox(t, "r", ns).Obj()
	r.Spec.PodTemplate.Spec.RuntimeClassName = nil
	framework.MustCreate(t, ctx, c, a)
	framework.MustCreate(t, ctx, c, b)
	framework.MustCreate(t, ctx, c, r)
	attackerPod, attackerToken := agentPod(t, "attacker", outside)
	create(t, ctx, attackerPod)

	ipA, ipB, ipR := waitSandboxReady(t, c, a), waitSandboxReady(t, c, b), waitSandboxReady(t, c, r)
	member := readyWarmMember(t, c, ns)
	ipMember := member.Status.PodIPs[0]
	tokenA, controlA := sandboxTokens(t, ctx, c, a.Name, ns)
	tokenB, _ := sandboxTokens(t, ctx, c, b.Name, ns)
	tokenR, controlR := sandboxTokens(t, ctx, c, r.Name, ns)
	tokenMember, _ := sandboxTokens(t, ctx, c, member.Name, ns)
	ipAttacker := waitReady(t, outside, attackerPod.Name)

	node := nodeInternalIP(t, ctx)
	controller := "https://" + net.JoinHostPort(readyPodIP(t, routerNamespace, map[string]string{"app.kubernetes.io/name": "paddock-controller"}), controllerMetrics)
	routerIP := readyPodIP(t, routerNamespace, map[string]string{"app.kubernetes.io/name": routerName})
	router := "http://" + net.JoinHostPort(routerIP, "8080")
	ensureCredentialsKey(t, ctx)
	holderOfA := scopedRouterToken(t, ctx, ns, "holder-of-a", a.Name)
	outsider := serviceAccountToken(t, outside, "default")

	// The holder of A reaches A through the router: the refusals below are of this token and
	// these headers, not of a router that refuses everything.
	framework.Eventually(t, func(ctx context.Context) error { return expectSandboxName(ctx, router, ns, a.Name, holderOfA) })

	// And the cluster's admin reads both /metrics: the 401s below are of the missing token.
	for _, url := range []string{controller + "/metrics", "https://" + net.JoinHostPort(routerIP, routerMetrics) + "/metrics"} {
		if o := sendFromHost(ctx, probe{method: http.MethodGet, url: url, header: bearerHeader(suite.restConfig.BearerToken)}); o.status != http.StatusOK {
			t.Errorf("GET %s with the admin token = %s, want 200", url, o)
		}
	}

	// The E2B front door: victim v and the attacker's own e in ns, an unclaimed member beside them.
	x := setUpE2BTarget(t, ctx, c, ns, outside, routerIP)
	sbE, sbV := boundTo(t, ctx, c, ns, x.e.id), boundTo(t, ctx, c, ns, x.v.id)
	tokenE2BMember, _ := sandboxTokens(t, ctx, c, x.member.Name, ns)

	procsA := dialSandboxd(t, ipA, tokenA)
	vantages := []vantage{
		{name: "host", send: sendFromHost},
		{name: "pod in " + outside, send: sendFromShell(runIn(dialSandboxd(t, ipAttacker, attackerToken)))},
		{name: "code in sandbox a", send: sendFromShell(runIn(procsA)), run: runIn(procsA)},
		{name: "code in E2B sandbox e", send: sendFromShell(runIn(dialSandboxd(t, sbE.Status.PodIPs[0], x.e.token)))},
	}
	// What each place may hold: the host tries made-up keys too, the others the attacker's own.
	keysOf := func(v vantage) []namedKey {
		keys := []namedKey{{"no API key", ""}, {"the API key of " + outside, x.otherKey}}
		if v.name == "host" {
			keys = append(keys, namedKey{"a made-up API key", "e2b_" + rand.String(40)})
		}
		return keys
	}

	sandboxd := func(ip, port string) string { return "http://" + net.JoinHostPort(ip, port) }
	routed := func(target, sandbox, token string, extra map[string]string) probe {
		h := map[string]string{"X-Sandbox-ID": sandbox, "X-Sandbox-Namespace": ns, "X-Sandbox-Port": sandboxdREST}
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		for k, v := range extra {
			h[k] = v
		}
		return probe{target: target, method: http.MethodGet, url: router + "/v1/files/", header: h}
	}
	exec := `{"config":{"command":["id"]}}`
	probes := []probe{
		{target: "sandbox b REST 8080, no token", method: http.MethodPost, url: sandboxd(ipB, sandboxdREST) + "/v1/processes", body: exec},
		{target: "sandbox b REST 8080, sandbox a's token", method: http.MethodGet, url: sandboxd(ipB, sandboxdREST) + "/v1/files/", header: bearerHeader(tokenA)},
		{target: "sandbox b legacy 8888, no token", method: http.MethodPost, url: sandboxd(ipB, "8888") + "/execute", body: `{"command":"id"}`},
		{target: "sandbox b legacy 8888, sandbox a's token", method: http.MethodPost, url: sandboxd(ipB, "8888") + "/execute", body: `{"command":"id"}`, header: bearerHeader(tokenA)},
		{target: "sandbox b E2B 49983, no token", method: http.MethodGet, url: sandboxd(ipB, e2bPort) + "/files?path=/etc/hostname"},
		{target: "warm member REST 8080, no token", method: http.MethodGet, url: sandboxd(ipMember, sandboxdREST) + "/v1/files/"},
		{target: "warm member REST 8080, its own sandbox token", method: http.MethodPost, url: sandboxd(ipMember, sandboxdREST) + "/v1/processes", body: exec, header: bearerHeader(tokenMember)},
		{target: "warm member claim-settings PUT, no token", method: http.MethodPut, url: sandboxd(ipMember, sandboxdREST) + "/v1/claim-settings", body: poison()},
		{target: "warm member claim-settings PUT, its sandbox token", method: http.MethodPut, url: sandboxd(ipMember, sandboxdREST) + "/v1/claim-settings", body: poison(), header: bearerHeader(tokenMember)},
		{target: "warm member claim-settings PUT, sandbox a's control token", method: http.MethodPut, url: sandboxd(ipMember, sandboxdREST) + "/v1/claim-settings", body: poison(), header: bearerHeader(controlA)},
		{target: "controller /metrics", method: http.MethodGet, url: controller + "/metrics"},
		{target: "controller /debug/pprof/", method: http.MethodGet, url: controller + "/debug/pprof/"},
		{target: "router /metrics", method: http.MethodGet, url: "https://" + net.JoinHostPort(routerIP, routerMetrics) + "/metrics"},
		{target: "kubelet 10250 /pods", method: http.MethodGet, url: "https://" + net.JoinHostPort(node, kubeletPort) + "/pods"},
		{target: "kubelet 10250 /run (exec)", method: http.MethodPost, url: "https://" + net.JoinHostPort(node, kubeletPort) + "/run/" + ns + "/" + b.Name + "/sandboxd?cmd=id"},
		{target: "kubelet read-only 10255 /pods", method: http.MethodGet, url: "http://" + net.JoinHostPort(node, kubeletReadOnlyPort) + "/pods"},
		{target: "API server: b's credentials Secret, no token", method: http.MethodGet, url: "https://" + net.JoinHostPort(node, apiServerPort) + "/api/v1/namespaces/" + ns + "/secrets/" + credentials.SandboxSecretName(b.Name)},
		{target: "API server: b's credentials Secret, outsider's token", method: http.MethodGet, url: "https://" + net.JoinHostPort(node, apiServerPort) + "/api/v1/namespaces/" + ns + "/secrets/" + credentials.SandboxSecretName(b.Name), header: bearerHeader(outsider)},
		{target: "dev registry reader 5001: the sandbox image's manifest, no credentials", method: http.MethodGet, url: "http://" + net.JoinHostPort(node, registryPort) + "/v2/paddock/sandbox/manifests/dev"},
		{target: "dev registry reader 5001: the sandbox image's manifest, a guessed password", method: http.MethodGet, url: "http://" + net.JoinHostPort(node, registryPort) + "/v2/paddock/sandbox/manifests/dev",
			header: map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("paddock-controller:guess"))}},
		{target: "dev registry reader 5001: start a push over the sandbox image, no credentials", method: http.MethodPost, url: "http://" + net.JoinHostPort(node, registryPort) + "/v2/paddock/sandbox/blobs/uploads/"},
		{target: "KWOK 10247 /metrics", method: http.MethodGet, url: "http://" + net.JoinHostPort(node, kwokPort) + "/metrics"},
		{target: "KWOK 10247 /debug/pprof/", method: http.MethodGet, url: "http://" + net.JoinHostPort(node, kwokPort) + "/debug/pprof/"},
		routed("router to b, no token", b.Name, "", nil),
		routed("router to b, a made-up token", b.Name, "not-a-token", nil),
		routed("router to b, outsider's ServiceAccount token", b.Name, outsider, nil),
		routed("router to b, the token of a's holder", b.Name, holderOfA, nil),
		routed("router to b, b's own sandbox token", b.Name, tokenB, nil),
		routed("router to the warm member, the token of a's holder", member.Name, holderOfA, nil),
		routed("router to a, forged X-Sandbox-Pod-IP of b", a.Name, holderOfA, map[string]string{"X-Sandbox-Pod-IP": ipB}),
		routed("router to a, forged X-Sandbox-Pod-IP of the warm member", a.Name, holderOfA, map[string]string{"X-Sandbox-Pod-IP": ipMember}),
		routed("router to a, forged X-Sandbox-Pod-IP of the node, port 10250", a.Name, holderOfA, map[string]string{"X-Sandbox-Pod-IP": node, "X-Sandbox-Port": kubeletPort}),
		routed("router to a, X-Sandbox-Port 10250", a.Name, holderOfA, map[string]string{"X-Sandbox-Port": kubeletPort}),
		routed("router to a, X-Sandbox-Port 49983 (undeclared)", a.Name, holderOfA, map[string]string{"X-Sandbox-Port": e2bPort}),
	}

	// The code interpreter's port by pod IP: v's without its token, and an unclaimed member's,
	// which stays locked even to the member's own token until a claim's settings arrive.
	probes = append(probes, x.interpDirectProbes(sbV.Status.PodIPs[0])...)
	probes = append(probes, interpDirect("the unclaimed E2B member's code interpreter 49999 by pod IP, its own sandbox token", x.member.Status.PodIPs[0], tokenE2BMember))

	var rows []attempt
	for _, v := range vantages {
		all := slices.Concat(probes, x.e2bProbes(keysOf(v), tokenA))
		switch v.name {
		case "host":
			all = append(all, x.ownerProbes(tokenE2BMember, a.Name, tokenA)...)
		case "code in sandbox a":
			// Where the API server's port-forward arrives: sandbox a's own loopback, and its address.
			all = append(all, selfProbes(ipA)...)
		case "code in E2B sandbox e":
			all = append(x.e2bProbes(keysOf(v), tokenA), x.interpDirectProbes(sbV.Status.PodIPs[0])...) // the Paddock rows are sandbox a's
		}
		for _, p := range all {
			o := v.send(ctx, p)
			rows = append(rows, attempt{from: v.name, what: p.method + " " + p.target, result: o.String(), held: p.judge(o)})
		}
	}
	rows = append(rows, registryUnreachable(ctx, vantages[3], node))
	rows = append(rows, grpcAttempts(ctx, ipB, ipMember, tokenA)...)
	rows = append(rows, credentialAttempts(ctx, vantages[2], tokenA, controlA)...)
	rows = append(rows, runtimeEnvAttempt(ctx, vantages[2], a.Spec.PodTemplate.Spec.RuntimeClassName != nil, tokenA, controlA))
	rows = append(rows, runtimeEnvAttempt(ctx, vantage{name: "code in sandbox r (runc)", run: runIn(dialSandboxd(t, ipR, tokenR))}, false, tokenR, controlR))
	rows = append(rows, stolenServiceAccountAttempt(ctx, vantages[2], ns, b.Name))
	rows = append(rows, secretAttempt(ctx, outside, ns, b.Name, outsider))
	rows = append(rows, portForwardAttempts(ctx, outsider, ns, a.Name)...)
	rows = append(rows, adoptionAttempt(t, ctx, c, ns))
	rows = append(rows, x.intact(t, ctx, c)...)

	report(t, rows)
}

// registryUnreachable tries the dev registry's reader address from a sandbox of a template whose
// managed NetworkPolicy denies the node: the registry must not even answer (its 401 says
// "credentials required"), whatever a password guess could do.
func registryUnreachable(ctx context.Context, v vantage, node string) attempt {
	o := v.send(ctx, probe{method: http.MethodGet, url: "http://" + net.JoinHostPort(node, registryPort) + "/v2/"})
	return attempt{from: v.name, what: "GET dev registry reader " + net.JoinHostPort(node, registryPort) + " (the template's NetworkPolicy denies the node)",
		result: o.String(), held: o.held() && !strings.Contains(o.body, "credentials required")}
}

// portForwardAttempts open the API server's port-forward, the way in that needs no token at the
// router and at sandboxd, with a ServiceAccount token that was not granted pods/portforward: to
// the router's Pod and to sandbox's. The API server refuses both before any runtime dials.
func portForwardAttempts(ctx context.Context, token, ns, sandbox string) []attempt {
	cfg := rest.AnonymousClientConfig(suite.restConfig)
	cfg.BearerToken = token
	routerPod := ""
	if pods, err := suite.client.CoreV1().Pods(routerNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + routerName}); err == nil && len(pods.Items) > 0 {
		routerPod = pods.Items[0].Name
	}
	var rows []attempt
	for _, target := range []struct{ what, ns, pod string }{
		{"the router's Pod", routerNamespace, routerPod},
		{"sandbox " + sandbox + "'s Pod", ns, sandbox},
	} {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fw, _, _, err := startPortForward(ctx, cfg, target.ns, target.pod, 8080)
		cancel()
		if fw != nil {
			fw.stop()
		}
		result := "port-forward opened"
		if err != nil {
			result = err.Error()
		}
		rows = append(rows, attempt{from: "host", what: "port-forward to " + target.what + " with the outsider's ServiceAccount token",
			result: result, held: err != nil && strings.Contains(strings.ToLower(err.Error()), "forbidden")})
	}
	return rows
}

// agentPod is the attacker's own pod in ns: the sandbox image as a plain Pod (no Sandbox, so no
// credentials from the controller) with a token the attacker chose, so that the test drives it
// through sandboxd like the code in a sandbox. Commands run through the API server's pod exec
// lose their output about half the time when the command line is long.
func agentPod(t *testing.T, name, ns string) (*corev1.Pod, string) {
	t.Helper()
	spec := sandboxdSandbox(t, name, ns).Obj().Spec.PodTemplate.Spec
	token := rand.String(32)
	spec.Containers[0].Env = append(spec.Containers[0].Env, corev1.EnvVar{Name: sandboxd.TokenEnv, Value: token})
	spec.TerminationGracePeriodSeconds = ptr[int64](1)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}, token
}

// report logs the table and fails the test once for every attempt that got through.
func report(t *testing.T, rows []attempt) {
	t.Helper()
	var table strings.Builder
	w := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "FROM\tATTEMPT\tRESULT\tHELD")
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].from < rows[j].from })
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\n", r.from, r.what, oneLine(r.result), r.held)
	}
	w.Flush()
	t.Logf("attacker suite, %d attempts:\n%s", len(rows), table.String())
	for _, r := range rows {
		if !r.held {
			t.Errorf("from %s, %s got through: %s", r.from, r.what, oneLine(r.result))
		}
	}
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

func bearerHeader(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// poison is claim settings an attacker would plant: a claim UID of its own and an env value
// the later claimant would run with.
func poison() string {
	return `{"claimName":"evil","claimUID":"00000000-0000-0000-0000-000000000666","env":{"GIT_DIR":"/tmp/hijacked-by-attacker"}}`
}

// sendFromHost sends p with Go's client, accepting any serving certificate (an attacker does).
func sendFromHost(ctx context.Context, p probe) outcome {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, p.method, p.url, strings.NewReader(p.body))
	if err != nil {
		return outcome{detail: err.Error()}
	}
	for k, v := range p.header {
		req.Header.Set(k, v)
	}
	if p.host != "" {
		req.Host = p.host
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the attacker does not verify
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return outcome{detail: err.Error()}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return outcome{status: resp.StatusCode, detail: http.StatusText(resp.StatusCode), body: string(body)}
}

// statusLine finds the last HTTP status line in what nc or curl printed.
var statusLine = regexp.MustCompile(`HTTP/1\.[01] (\d{3})`)

// probeDone ends every probe script's output, so output cut short by the exec stream is told
// apart from a server that answered nothing.
const probeDone = "probe-done"

// sendFromShell sends p from a shell where run executes (env-base, the sandboxes' image): plain
// HTTP as a raw request through nc (any method, any header), HTTPS with curl.
func sendFromShell(run func(ctx context.Context, script string) (string, error)) func(context.Context, probe) outcome {
	return func(ctx context.Context, p probe) outcome {
		script, err := shellRequest(p)
		if strings.HasPrefix(p.url, "https:") {
			script = curlRequest(p)
		}
		if err != nil {
			return outcome{detail: err.Error()}
		}
		var out string
		// A stream cut short is tried again; the marker tells it from a silent server.
		for try := 0; try < 5 && !strings.Contains(out, probeDone); try++ {
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			out, err = run(ctx, script+"; echo "+probeDone)
			cancel()
			if err != nil && out == "" {
				out = "could not run the probe: " + err.Error()
			}
		}
		if !strings.Contains(out, probeDone) {
			return outcome{detail: "the probe's output never arrived: " + out}
		}
		out = strings.TrimSpace(strings.ReplaceAll(out, probeDone, ""))
		m := statusLine.FindAllStringSubmatch(out, -1)
		if len(m) == 0 {
			if out == "" {
				out = "EOF: the server closed the connection without an answer"
			}
			return outcome{detail: out}
		}
		code, _ := strconv.Atoi(m[len(m)-1][1])
		return outcome{status: code, detail: http.StatusText(code), body: out}
	}
}

// curlRequest renders p as a curl command that accepts any serving certificate (an attacker does)
// and prints the answer's status line and headers.
func curlRequest(p probe) string {
	args := []string{"curl", "-sS", "-k", "-i", "--http1.1", "--max-time", "10", "-X", p.method}
	for k, v := range p.header {
		args = append(args, "-H", shellQuote(k+": "+v))
	}
	if p.host != "" {
		args = append(args, "-H", shellQuote("Host: "+p.host))
	}
	if p.body != "" {
		args = append(args, "--data-binary", shellQuote(p.body))
	}
	return strings.Join(append(args, shellQuote(p.url)), " ") + " 2>&1 | head -c 16384"
}

// shellRequest renders p as a shell script sending it through nc over plain HTTP. The request travels
// base64-encoded, so no value needs shell quoting.
func shellRequest(p probe) (string, error) {
	req, err := http.NewRequest(p.method, p.url, nil)
	if err != nil {
		return "", err
	}
	host, port := req.URL.Hostname(), req.URL.Port()
	hostHeader := req.URL.Host
	if p.host != "" {
		hostHeader = p.host
	}
	var raw strings.Builder
	fmt.Fprintf(&raw, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n", p.method, req.URL.RequestURI(), hostHeader, len(p.body))
	for k, v := range p.header {
		fmt.Fprintf(&raw, "%s: %s\r\n", k, v)
	}
	raw.WriteString("\r\n" + p.body)
	return fmt.Sprintf("echo %s | base64 -d | nc -w 5 %s %s 2>&1 | head -c 16384",
		base64.StdEncoding.EncodeToString([]byte(raw.String())), host, port), nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runIn runs a script through sandboxd's Execute, as the code in that sandbox would.
func runIn(procs processv1.ProcessServiceClient) func(ctx context.Context, script string) (string, error) {
	return func(ctx context.Context, script string) (string, error) {
		res, err := procs.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"sh", "-c", script}}})
		if err != nil {
			return "", err
		}
		return string(res.GetStdout()) + string(res.GetStderr()), nil
	}
}

// grpcAttempts calls sandboxd's gRPC port of b and of the warm member from the host.
func grpcAttempts(ctx context.Context, ipB, ipMember, tokenA string) []attempt {
	try := func(what, ip, token string) attempt {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
		}
		conn, err := grpc.NewClient(net.JoinHostPort(ip, sandboxdGRPC), opts...)
		if err != nil {
			return attempt{from: "host", what: "gRPC Execute " + what, result: err.Error()}
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = processv1.NewProcessServiceClient(conn).Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"id"}}})
		code := status.Code(err)
		return attempt{from: "host", what: "gRPC Execute " + what, result: fmt.Sprintf("%s %v", code, err),
			held: code == codes.Unauthenticated || code == codes.PermissionDenied}
	}
	return []attempt{
		try("sandbox b 9090, no token", ipB, ""),
		try("sandbox b 9090, sandbox a's token", ipB, tokenA),
		try("warm member 9090, sandbox a's token", ipMember, tokenA),
	}
}

// credentialAttempts looks for sandbox a's tokens from the code running in it: every
// process's environ (sandboxd is PID 1), its own env, the ServiceAccount token, and files that
// sandboxd could have left.
func credentialAttempts(ctx context.Context, in vantage, token, control string) []attempt {
	scripts := []struct{ what, script string }{
		{"read /proc/1/environ (sandboxd)", "cat /proc/1/environ 2>&1 | tr '\\0' '\\n'"},
		{"read every /proc/<pid>/environ", "for f in /proc/[0-9]*/environ; do echo \"$f: $(tr '\\0' ' ' < $f 2>&1)\"; done"},
		{"read sandboxd's memory /proc/1/mem", "dd if=/proc/1/mem bs=1 count=1 2>&1"},
		{"list sandboxd's fds /proc/1/fd", "ls -l /proc/1/fd 2>&1"},
		{"env of a command", "env"},
		{"ServiceAccount token", "cat /var/run/secrets/kubernetes.io/serviceaccount/token 2>&1"},
		{"grep the filesystem for the token", "grep -rlF " + shellQuote(token) + " /workspace /tmp /etc 2>/dev/null; echo searched"},
	}
	var rows []attempt
	for _, s := range scripts {
		out, err := in.run(ctx, s.script)
		leaked := strings.Contains(out, token) || strings.Contains(out, control) || strings.Contains(out, sandboxd.TokenEnv+"=")
		result := oneLine(out)
		if err != nil {
			result = err.Error()
		}
		if leaked {
			result = "a token is in the output"
		}
		rows = append(rows, attempt{from: in.name, what: s.what, result: result, held: err == nil && !leaked})
	}
	return rows
}

// runtimeEnvAttempt reads what the container runtime shows the sandbox about its own container:
// stock gVisor's /proc/gvisor/spec_environ hands every process the container spec's environment,
// SANDBOXD_TOKEN and SANDBOXD_CONTROL_TOKEN included, whatever sandboxd scrubs from its own. It
// lists /proc/gvisor and reads every regular file there (checkpoint and fscheckpoint are devices
// whose reads wait for a checkpoint). Under gVisor (onGVisor) the row holds only when the code
// runs on gVisor's kernel (its dmesg), so that a sandbox silently on runc cannot pass it.
func runtimeEnvAttempt(ctx context.Context, in vantage, onGVisor bool, token, control string) attempt {
	script := `dmesg 2>&1 | head -n 1; ls -la /proc/gvisor/ 2>&1; tr '\0' '\n' < /proc/gvisor/spec_environ 2>&1; ` +
		`for f in /proc/gvisor/* /proc/gvisor/.[!.]*; do [ -f "$f" ] && echo "== $f" && tr '\0' '\n' < "$f" 2>&1 | head -c 65536; done; true`
	what := "read /proc/gvisor/spec_environ and every file in /proc/gvisor"
	if onGVisor {
		what += " (gVisor)"
	}
	out, err := in.run(ctx, script)
	boot, _, _ := strings.Cut(out, "\n")
	leaked := strings.Contains(out, token) || strings.Contains(out, control) || strings.Contains(out, sandboxd.TokenEnv+"=") || strings.Contains(out, sandboxd.ControlTokenEnv+"=")
	a := attempt{from: in.name, what: what, result: oneLine(out), held: err == nil && !leaked}
	switch {
	case err != nil:
		a.result = err.Error()
	case leaked:
		a.result = "a token is in the output, in " + strings.Join(secretNames(out), ", ")
	case onGVisor && !strings.Contains(boot, "Starting gVisor"):
		a.result, a.held = "the sandbox does not run on gVisor's kernel (dmesg: "+boot+"), so this proves nothing about gVisor", false
	}
	return a
}

// secretNames lists the SANDBOXD_* variables in out, one per line, by name only: the report must
// not print the tokens it found.
func secretNames(out string) []string {
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if name, _, ok := strings.Cut(line, "="); ok && strings.HasPrefix(name, sandboxd.SecretEnvPrefix) {
			names = append(names, name)
		}
	}
	return names
}

// stolenServiceAccountAttempt takes the ServiceAccount token mounted in sandbox a (a bare
// Sandbox keeps the pod's default, as upstream) out to the host and reads b's credentials
// Secret with it.
func stolenServiceAccountAttempt(ctx context.Context, in vantage, ns, sandbox string) attempt {
	out, err := in.run(ctx, "cat /var/run/secrets/kubernetes.io/serviceaccount/token 2>/dev/null")
	if err != nil || strings.TrimSpace(out) == "" {
		return attempt{from: in.name, what: "steal the pod's ServiceAccount token", result: fmt.Sprintf("no token mounted (%v)", err), held: true}
	}
	a := secretAttempt(ctx, ns, ns, sandbox, strings.TrimSpace(out))
	a.from, a.what = in.name, "read Secret "+credentials.SandboxSecretName(sandbox)+" with the stolen ServiceAccount token"
	return a
}

// secretAttempt reads b's credentials Secret with the ServiceAccount token a pod in another
// namespace holds.
func secretAttempt(ctx context.Context, outside, ns, sandbox, token string) attempt {
	cfg := rest.AnonymousClientConfig(suite.restConfig)
	cfg.BearerToken = token
	a := attempt{from: "pod in " + outside, what: "get Secret " + credentials.SandboxSecretName(sandbox) + " with its ServiceAccount"}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		a.result = err.Error()
		return a
	}
	_, err = cs.CoreV1().Secrets(ns).Get(ctx, credentials.SandboxSecretName(sandbox), metav1.GetOptions{})
	a.result, a.held = fmt.Sprint(err), apierrors.IsForbidden(err)
	return a
}

// adoptionAttempt checks what the probes above left behind: a claim on the pool gets a member
// that no attacker bound, and the env it asked for.
func adoptionAttempt(t *testing.T, ctx context.Context, c client.Client, ns string) attempt {
	t.Helper()
	a := attempt{from: "host", what: "a later claim adopts an unpoisoned warm member"}
	claim := builder.MakeClaim("victim", ns, "pool").Obj()
	framework.MustCreate(t, ctx, c, claim)
	var sandbox string
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		sandbox = claim.Status.Sandbox.Name
		if sandbox == "" {
			return fmt.Errorf("claim has no sandbox yet; conditions %s", builder.FormatConditions(claim.Status.Conditions))
		}
		return builder.HasCondition(claim.Status.Conditions, agentsv1beta1.SandboxConditionReady, metav1.ConditionTrue, "")
	})
	sb := &agentsv1beta1.Sandbox{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandbox}, sb); err != nil {
		a.result = err.Error()
		return a
	}
	token, _ := sandboxTokens(t, ctx, c, sandbox, ns)
	out, err := runIn(dialSandboxd(t, sb.Status.PodIPs[0], token))(ctx, "echo GIT_DIR=$GIT_DIR")
	a.result = oneLine(out)
	if err != nil {
		a.result = err.Error()
	}
	a.held = err == nil && !strings.Contains(out, "hijacked")
	return a
}

// readyWarmMember waits for the pool's member to be Ready and returns it.
func readyWarmMember(t *testing.T, c client.Client, ns string) *agentsv1beta1.Sandbox {
	t.Helper()
	var member *agentsv1beta1.Sandbox
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error {
		list := &agentsv1beta1.SandboxList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.HasLabels{agentsv1beta1.WarmPoolSandboxLabel}); err != nil {
			return err
		}
		for i := range list.Items {
			sb := &list.Items[i]
			if len(sb.Status.PodIPs) > 0 && builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady, metav1.ConditionTrue, "") == nil {
				member = sb
				return nil
			}
		}
		return fmt.Errorf("no Ready warm member among %d", len(list.Items))
	})
	return member
}

// sandboxTokens reads both tokens of a Sandbox from its credentials Secret.
func sandboxTokens(t *testing.T, ctx context.Context, c client.Client, name, ns string) (token, control string) {
	t.Helper()
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: credentials.SandboxSecretName(name)}, secret); err != nil {
		t.Fatalf("reading the credentials Secret of Sandbox %s: %v", name, err)
	}
	return string(secret.Data[credentials.TokenDataKey]), string(secret.Data[credentials.ControlTokenDataKey])
}

// nodeInternalIP is the real node's address (kubelet, API server and KWOK listen there).
func nodeInternalIP(t *testing.T, ctx context.Context) string {
	t.Helper()
	nodes, err := suite.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "paddock.dev/node=real"})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("the real node: %v (%d found)", err, len(nodes.Items))
	}
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatalf("node %s has no InternalIP", nodes.Items[0].Name)
	return ""
}

// scopedRouterToken returns a token of a new ServiceAccount in ns allowed through the router to
// the one sandbox named.
func scopedRouterToken(t *testing.T, ctx context.Context, ns, name, sandbox string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := suite.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{authz.SandboxAccess.Group}, Resources: []string{authz.SandboxAccess.Resource + "/" + authz.SandboxAccess.Subresource},
		Verbs: []string{authz.SandboxAccess.Verb}, ResourceNames: []string{sandbox}}}}
	if _, err := suite.client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}}
	if _, err := suite.client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return serviceAccountToken(t, ns, name)
}

// serviceAccountToken requests a token of ServiceAccount ns/name.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	var token string
	framework.Eventually(t, func(ctx context.Context) error {
		tr, err := suite.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](3600)}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		token = tr.Status.Token
		return nil
	})
	return token
}
