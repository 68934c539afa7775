package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/standin"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// testEgress proves paddock-egress on the real node from code inside sandboxes on gVisor and on
// runc, under the policy "allow example.test and api.example.test, deny everything else, add
// a Secret's Authorization to api.example.test". Each refusal sits next to a control over the
// same path that succeeds: example.test over HTTP and HTTPS works, other.test does not resolve,
// other.test's raw address is refused, any resolver is answered by the egress DNS (NXDOMAIN for
// other.test, which the stand-in's own resolver knows), fronting by SNI or Host through an
// allowed name is refused, UDP, ICMP and IPv6 do not leave, and a claim annotation patch opens
// other.test with no restart. The injected credential reaches api.example.test over HTTP and
// HTTPS, and an attacker table shows it is nowhere the sandbox can read.
func testEgress(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 20*time.Minute)
	c := paddockClient(t)
	internet := filepath.Join(cmp.Or(suite.stateDir, *stateDirFlag), "internet")
	stand := standin.NewClient(internet)
	plan, err := stand.Plan(ctx)
	if err != nil {
		t.Fatalf("the internet stand-in of %s: %v", internet, err)
	}
	standinCA, err := os.ReadFile(standin.CACertPath(internet))
	if err != nil {
		t.Fatal(err)
	}
	addr := func(name string) string {
		h, ok := plan.Lookup(name)
		if !ok {
			t.Fatalf("the stand-in serves no %s: %+v", name, plan.Hosts)
		}
		return h.Addr.String()
	}
	exampleIP, otherIP, cdnIP := addr("example.test"), addr("other.test"), addr("cdn.test")

	// The credential: a Secret in the sandbox's namespace, never given to the sandbox.
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	credential := "Bearer e2e-" + hex.EncodeToString(raw)
	framework.MustCreate(t, ctx, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api-key", Namespace: ns},
		Data: map[string][]byte{"authorization": []byte(credential)}})
	policy := egress.Policy{
		Allow: []string{"example.test", "api.example.test"},
		Deny:  []string{egress.AllTraffic},
		Inject: []egress.InjectRule{{Domain: "api.example.test", Headers: []egress.Header{
			{Name: "Authorization", SecretKeyRef: egress.SecretKeyRef{Name: "api-key", Key: "authorization"}}}}},
	}
	gvisor, runc := policedTemplate(t, ctx, c, ns, policy)
	for _, name := range []string{gvisor, runc} {
		framework.MustCreate(t, ctx, c, poolOf(ns, name, 1))
	}

	// The installation's egress CA, which paddock-egress made: sandboxes trust it by themselves
	// for the hosts whose requests get headers (the controller mounts it, SSL_CERT_FILE and
	// friends point at it), so no command below names it.
	framework.Eventually(t, func(ctx context.Context) error {
		_, err := suite.client.CoreV1().Secrets("paddock-system").Get(ctx, "paddock-egress-ca", metav1.GetOptions{})
		return err
	})

	paddock, err := sdk.New(suite.restConfig, sdk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ runtime, template string }{{"gVisor", gvisor}, {"runc", runc}} {
		t.Run("sandbox on "+tc.runtime, func(t *testing.T) {
			sb, runArgv := claimFromPool(t, ctx, paddock, c, ns, tc.template)
			// The runtime runs no shell; these commands need one for pipes, globs and redirections.
			run := func(ctx context.Context, cmd string) (string, error) { return runArgv(ctx, "sh -c "+shellQuote(cmd)) }
			sh := func(cmd string) func(context.Context) (string, error) {
				return func(ctx context.Context) (string, error) { return run(ctx, cmd) }
			}
			waitEgressApplied(t, c, ns, sb.SandboxName())
			if _, err := run(ctx, fmt.Sprintf("echo %s | base64 -d > /tmp/standin-ca.crt", base64.StdEncoding.EncodeToString(standinCA))); err != nil {
				t.Fatalf("writing the stand-in's CA into the sandbox: %v", err)
			}
			curl := func(args string) func(context.Context) (string, error) { return sh("curl -sS -m 10 " + args) }

			// Allowed: example.test over HTTP, and over HTTPS spliced untouched (no inject rule), so
			// verified against the stand-in's own CA.
			expectOutput(t, "http://example.test/", curl("http://example.test/"), "hello from example.test")
			expectOutput(t, "https://example.test/", curl("--cacert /tmp/standin-ca.crt https://example.test/"), "hello from example.test")

			// Denied by name, by address, through another resolver, by fronting.
			expectOutput(t, "http://other.test/ (no such name for this sandbox)", failing(curl("http://other.test/")), "Could not resolve host")
			expectOutput(t, "plain HTTP to other.test's address", curl("http://"+otherIP+"/"), "is not allowed for this sandbox")
			expectFailure(t, "HTTPS to other.test's address", curl("-k https://"+otherIP+"/"))
			expectOutput(t, "Host other.test to example.test's address", curl("-H 'Host: other.test' http://"+exampleIP+"/"), "is not allowed for this sandbox")
			expectFailure(t, "SNI example.test to cdn.test's address (fronting, as DoH to a CDN would)",
				curl("--cacert /tmp/standin-ca.crt --resolve example.test:443:"+cdnIP+" https://example.test/"))
			for _, dns := range []struct{ what, server string }{
				{"the stand-in's resolver", plan.Resolver.String()},
				{"a resolver that does not exist", "198.51.100.53"},
			} {
				for _, proto := range []string{"udp", "tcp"} {
					// rcode 0 for an allowed name proves the query was answered; rcode 3 (NXDOMAIN) for
					// other.test, which the stand-in's resolver knows, proves who answered.
					expectOutput(t, "example.test over "+proto+" from "+dns.what, sh("python3 -c "+shellQuote(dnsScript(proto, dns.server, "example.test"))), "answered rcode 0")
					expectOutput(t, "other.test over "+proto+" from "+dns.what, sh("python3 -c "+shellQuote(dnsScript(proto, dns.server, "other.test"))), "answered rcode 3")
				}
			}
			expectOutput(t, "UDP to example.test's address", failing(sh("python3 -c "+shellQuote(udpScript(exampleIP)))), "timed out")
			// No AAAA answer, no IPv6 route: curl fails to resolve or to connect, depending on the runtime.
			expectFailure(t, "IPv6 to example.test", curl("-6 http://example.test/"))

			// Header injection over HTTP and HTTPS: the client's own Authorization is replaced.
			before := time.Now()
			expectOutput(t, "http://api.example.test/", curl("-H 'Authorization: Bearer mine' http://api.example.test/"), "hello from api.example.test")
			// HTTPS with no CA flag: the sandbox trusts the egress CA by itself, for curl and for
			// Python's urllib alike.
			expectOutput(t, "https://api.example.test/ with curl, no --cacert",
				curl("-H 'Authorization: Bearer mine' https://api.example.test/"), "hello from api.example.test")
			// The trusted set is Mozilla's roots plus the egress CA, not the CA alone: hosts without an
			// inject rule keep verifying against public roots.
			expectOutput(t, "python3's default TLS context holds the public roots",
				sh("python3 -c "+shellQuote(`import ssl; n = len(ssl.create_default_context().get_ca_certs()); print("public roots" if n > 100 else n)`)), "public roots")
			expectOutput(t, "https://api.example.test/ with python3 urllib, no CA argument",
				sh("python3 -c "+shellQuote(`import urllib.request; print(urllib.request.urlopen("https://api.example.test/", timeout=10).read().decode())`)), "hello from api.example.test")
			reqs, err := stand.Requests(ctx, "api.example.test")
			if err != nil {
				t.Fatal(err)
			}
			for _, scheme := range []string{"http", "https"} {
				if !slices.ContainsFunc(reqs, func(r standin.Request) bool {
					return r.Time.After(before.Add(-time.Minute)) && r.Scheme == scheme && r.Header.Get("Authorization") == credential
				}) {
					t.Errorf("api.example.test saw no %s request carrying the Secret's Authorization: %+v", scheme, reqs)
				}
			}

			// The attacker: code in the sandbox looks for the credential everywhere it can read,
			// and for the egress component's ports.
			secretPart := strings.TrimPrefix(credential, "Bearer ")
			var rows []attempt
			look := func(what, script string) {
				out, _ := run(ctx, script)
				rows = append(rows, attempt{from: "sandbox on " + tc.runtime, what: what, result: out,
					held: !strings.Contains(out, secretPart) && !strings.Contains(out, "found-in-files")})
			}
			look("read the injected credential from the environment", "env")
			look("read it from every process's environ and cmdline", "cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n'")
			look("search the writable and configuration files for it",
				"if grep -rIlq "+secretPart+" /etc /home /root /tmp /var /run /opt /srv /usr/local 2>/dev/null; then echo found-in-files; fi; echo searched")
			look("see it in the traffic of an injected request (curl -v, HTTP and HTTPS)",
				"curl -sv -m 10 http://api.example.test/ 2>&1; curl -sv -m 10 https://api.example.test/ 2>&1")
			caFiles, _ := run(ctx, "cat /etc/paddock/egress-ca/* 2>&1")
			rows = append(rows, attempt{from: "sandbox on " + tc.runtime, what: "read the egress CA's private key from the trust it was given",
				result: fmt.Sprintf("%d bytes of certificates", len(caFiles)), held: strings.Contains(caFiles, "BEGIN CERTIFICATE") && !strings.Contains(caFiles, "PRIVATE KEY")})
			look("have it echoed by the allowed host", "curl -s -m 10 -D - http://api.example.test/ 2>&1")
			// ICMP: env-base has no ping; Python's ping socket (or a raw one) either cannot be
			// opened (no CAP_NET_RAW, ping_group_range) or gets no answer. The result says which.
			icmpOut, icmpErr := run(ctx, "python3 -c "+shellQuote(icmpScript(exampleIP)))
			rows = append(rows, attempt{from: "sandbox on " + tc.runtime, what: "ICMP echo to example.test's address",
				result: fmt.Sprintf("%s %v", icmpOut, icmpErr), held: icmpErr != nil && !strings.Contains(icmpOut, "reply")})
			node := nodeInternalIP(t, ctx)
			for _, port := range []string{"15001", "15053"} {
				// The redirect sends it to the proxy whatever the port; the node's address is refused.
				out, err := run(ctx, "curl -sS -f -m 10 http://"+net.JoinHostPort(node, port)+"/metrics")
				rows = append(rows, attempt{from: "sandbox on " + tc.runtime, what: "reach paddock-egress's port " + port + " on the node directly",
					result: fmt.Sprintf("%s %v", out, err), held: err != nil})
			}
			report(t, rows)

			// A policy change on the running sandbox: the claim's annotation replaces the
			// template's, the Pod's container keeps running, other.test opens.
			pod := sandboxPod(t, ns, sb.SandboxName())
			started := pod.Status.ContainerStatuses[0].State.Running.StartedAt
			changed := policy
			changed.Allow = append(slices.Clone(policy.Allow), "other.test")
			patchClaimPolicy(t, ctx, c, ns, sb.ClaimName(), changed)
			expectOutput(t, "http://other.test/ after the claim allows it", curl("http://other.test/"), "hello from other.test")
			waitEgressApplied(t, c, ns, sb.SandboxName())
			after := sandboxPod(t, ns, sb.SandboxName())
			if st := after.Status.ContainerStatuses[0]; st.RestartCount != pod.Status.ContainerStatuses[0].RestartCount || st.State.Running == nil || !st.State.Running.StartedAt.Equal(&started) {
				t.Errorf("the sandbox's container restarted for the policy change: before started %s, after %+v", started, st)
			}
		})
	}
}

// policedTemplate copies the dev cluster's E2B base template (env-base on gVisor) into ns with
// policy on its Pods, and a copy of it on runc; it returns both names.
func policedTemplate(t *testing.T, ctx context.Context, c client.Client, ns string, policy egress.Policy) (gvisor, runc string) {
	t.Helper()
	var dev extensionsv1beta1.SandboxTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: e2b.DefaultTemplate}, &dev); err != nil {
		t.Fatalf("the E2B template %s of paddock dev up: %v", e2b.DefaultTemplate, err)
	}
	doc, err := json.Marshal(policy)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"policed", "policed-runc"} {
		tpl := &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: dev.Annotations},
			Spec: *dev.Spec.DeepCopy()}
		tpl.Spec.VolumeClaimTemplates = nil
		tpl.Spec.PodTemplate.Spec.Containers[0].VolumeMounts = nil
		if tpl.Spec.PodTemplate.ObjectMeta.Annotations == nil {
			tpl.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{}
		}
		tpl.Spec.PodTemplate.ObjectMeta.Annotations[egress.PolicyAnnotation] = string(doc)
		if name == "policed-runc" {
			tpl.Spec.PodTemplate.Spec.RuntimeClassName = nil
		}
		framework.MustCreate(t, ctx, c, tpl)
	}
	return "policed", "policed-runc"
}

// patchClaimPolicy sets the claim's egress annotation, which replaces its template's.
func patchClaimPolicy(t *testing.T, ctx context.Context, c client.Client, ns, claim string, policy egress.Policy) {
	t.Helper()
	doc, err := json.Marshal(policy)
	if err != nil {
		t.Fatal(err)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{egress.PolicyAnnotation: string(doc)}}})
	cl := &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns}}
	if err := c.Patch(ctx, cl, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("patching claim %s/%s's egress policy: %v", ns, claim, err)
	}
}

// waitEgressApplied waits for condition EgressPolicy Applied on the Sandbox.
func waitEgressApplied(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		var sb agentsv1beta1.Sandbox
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sb); err != nil {
			return err
		}
		return builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionEgressPolicy, metav1.ConditionTrue, agentsv1beta1.SandboxReasonEgressApplied)
	})
}

// sandboxPod is the running Pod of Sandbox name.
func sandboxPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, func(ctx context.Context) error {
		p, err := suite.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("pod %s/%s has no running container: %+v", ns, name, p.Status.ContainerStatuses)
		}
		pod = p
		return nil
	})
	return pod
}

// failing turns an expected failure into output: it succeeds with the output when do fails.
func failing(do func(context.Context) (string, error)) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		out, err := do(ctx)
		if err == nil {
			return out, fmt.Errorf("succeeded: %q; want it refused", out)
		}
		return out, nil
	}
}

// dnsScript is Python that sends one A query for name to server over proto (udp or tcp) and
// prints "answered rcode N", or fails.
func dnsScript(proto, server, name string) string {
	return fmt.Sprintf(`import socket, struct
q = struct.pack(">HHHHHH", 0x5050, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in %q.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
if %q == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(q, (%q, 53))
    r = s.recv(512)
else:
    s = socket.create_connection((%q, 53), timeout=5)
    s.sendall(struct.pack(">H", len(q)) + q)
    r = s.recv(2 + 512)[2:]
print("answered rcode", r[3] & 15)
`, name, proto, server, server)
}

// udpScript is Python that sends a datagram to port 7 of ip on a connected socket and waits
// for an answer or an ICMP error: a dropped datagram times out.
func udpScript(ip string) string {
	return fmt.Sprintf(`import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.connect((%q, 7))
s.send(b"ping")
print(s.recv(512))
`, ip)
}

// icmpScript is Python that sends an ICMP echo to ip from a ping socket (a raw one if that is
// refused) and prints "reply" when an answer comes.
func icmpScript(ip string) string {
	return fmt.Sprintf(`import socket
echo = bytes([8, 0, 0xf7, 0xfe, 0, 1, 0, 0])
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
except OSError:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(5)
s.sendto(echo, (%q, 0))
s.recv(512)
print("reply")
`, ip)
}
