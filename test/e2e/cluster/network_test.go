package cluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/standin"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/framework"
)

// testNetwork proves what the local cluster's network enforces, each refusal next to a control
// that succeeds over the same path, so that no row holds only because something is broken:
//   - NetworkPolicy is enforced (kube-router): a pod in the namespace that a policy forbids
//     cannot connect, while the same client reaches an unguarded pod;
//   - under the managed policy, sandboxes on gVisor and on runc reach the internet stand-in's
//     hosts by name over HTTP and HTTPS (trusting the stand-in's CA), and cannot reach another
//     namespace's pod, the API server, the kubelet or the node's DNS, which a pod without policy
//     reaches;
//   - nothing is routed off the machine from the pod bridge.
func testNetwork(t *testing.T) {
	ns, outside := namespace(t), namespace(t)
	ctx := framework.Context(t, 15*time.Minute)
	c := paddockClient(t)
	stateDir := suite.stateDir
	if stateDir == "" {
		stateDir = *stateDirFlag
	}
	stand := standin.NewClient(filepath.Join(stateDir, "internet"))
	plan, err := stand.Plan(ctx)
	if err != nil {
		t.Fatalf("the internet stand-in of %s: %v", stateDir, err)
	}
	caPEM, err := os.ReadFile(standin.CACertPath(filepath.Join(stateDir, "internet")))
	if err != nil {
		t.Fatal(err)
	}

	// Sandboxes under the managed policy: the dev cluster's base template (env-base, gVisor) and
	// a copy on runc.
	copyE2BTemplate(t, ctx, c, ns, e2b.DefaultTemplate, false)
	runc := copyTemplateOnRunc(t, ctx, c, ns, e2b.DefaultTemplate)
	for _, name := range []string{e2b.DefaultTemplate, runc} {
		framework.MustCreate(t, ctx, c, poolOf(ns, name, 1))
	}

	// Plain pods: servers in ns and outside, one behind a policy that admits nothing, and a
	// client in ns that no policy restricts.
	servers := map[string]string{}
	for _, s := range []struct{ name, ns string }{{"open", ns}, {"guarded", ns}, {"stranger", outside}} {
		pod := busyboxPod(s.name, s.ns, `mkdir -p /www && echo `+s.name+` > /www/index.html && httpd -f -p 8080 -h /www; :`)
		pod.Labels = map[string]string{"app": s.name}
		pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}
		create(t, ctx, pod)
	}
	create(t, ctx, busyboxPod("peer", ns, "sleep 3600"))
	denyIngress := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded-admits-nobody", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if _, err := suite.client.NetworkingV1().NetworkPolicies(ns).Create(ctx, denyIngress, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ name, ns string }{{"open", ns}, {"guarded", ns}, {"stranger", outside}} {
		servers[s.name] = waitReady(t, s.ns, s.name)
	}
	waitReady(t, ns, "peer")
	node := nodeInternalIP(t, ctx)

	// The node carries the bridge's range, so the managed policy's discovery denies it.
	framework.Eventually(t, func(ctx context.Context) error {
		np := &networkingv1.NetworkPolicy{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandboxtemplate.PolicyName(e2b.DefaultTemplate)}, np); err != nil {
			return err
		}
		for _, rule := range np.Spec.Egress {
			for _, peer := range rule.To {
				if peer.IPBlock != nil && slices.Contains(peer.IPBlock.Except, "198.18.0.0/24") && slices.Contains(peer.IPBlock.Except, node+"/32") {
					return nil
				}
			}
		}
		return fmt.Errorf("the managed policy's egress %+v does not deny the pod range 198.18.0.0/24 and the node %s", np.Spec.Egress, node)
	})

	// From the peer, a pod with no policy of its own. busybox nc, not wget: the image's static
	// wget crashes (exit 139) whatever it fetches.
	peerGet := func(addr string) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			return execInPod(ctx, ns, "peer", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 `+strings.Replace(addr, ":", " ", 1))
		}
	}
	peerGets := func(ip string) func(context.Context) (string, error) { return peerGet(ip + ":8080") }
	t.Run("NetworkPolicy is enforced: the peer reaches the open pod, not the guarded one", func(t *testing.T) {
		expectOutput(t, "peer to open", peerGets(servers["open"]), "open")
		expectOutput(t, "peer to stranger in "+outside, peerGets(servers["stranger"]), "stranger")
		expectFailure(t, "peer to guarded", peerGets(servers["guarded"]))
		// The host is not a pod: the node reaches every pod, the guarded one too.
		framework.Eventually(t, func(ctx context.Context) error {
			body, err := httpGet(ctx, "http://"+servers["guarded"]+":8080/")
			if err != nil || body != "guarded\n" {
				return fmt.Errorf("GET the guarded pod from the host = %q, %v; want guarded", body, err)
			}
			return nil
		})
	})
	t.Run("a pod without policy reaches the node's DNS, the API server and the stand-in by name", func(t *testing.T) {
		expectOutput(t, "peer asks the node's DNS", func(ctx context.Context) (string, error) {
			return execInPod(ctx, ns, "peer", "nslookup", "kubernetes.default.svc."+devcluster.ClusterDomain, node)
		}, "Address")
		// Plain HTTP to the TLS port: the API server's own 400 proves the connection.
		expectOutput(t, "peer connects to the API server", peerGet(node+":"+apiServerPort), "400")
		example, _ := plan.Lookup("example.test")
		expectOutput(t, "peer resolves example.test (CoreDNS forwards to the stand-in)", func(ctx context.Context) (string, error) {
			return execInPod(ctx, ns, "peer", "nslookup", "example.test")
		}, "Address: "+example.Addr.String())
		expectOutput(t, "peer gets the stand-in's example.test", peerGet(example.Addr.String()+":80"), "hello from example.test")
	})

	paddock, err := sdk.New(suite.restConfig, sdk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	caFile := "/tmp/standin-ca.crt"
	writeCA := fmt.Sprintf("sh -c 'echo %s | base64 -d > %s'", base64.StdEncoding.EncodeToString(caPEM), caFile)
	for _, tc := range []struct{ runtime, template string }{{"gVisor", e2b.DefaultTemplate}, {"runc", runc}} {
		t.Run("sandbox on "+tc.runtime, func(t *testing.T) {
			sb, run := claimFromPool(t, ctx, paddock, c, ns, tc.template)
			if _, err := run(ctx, writeCA); err != nil {
				t.Fatalf("writing the stand-in CA into the sandbox: %v", err)
			}
			if out, err := run(ctx, "cat /etc/resolv.conf"); err != nil || !strings.Contains(out, "nameserver "+plan.Resolver.String()) {
				t.Errorf("the sandbox's resolv.conf = %q, %v; want the stand-in's resolver %s", out, err, plan.Resolver)
			}
			// curl exits 7 when it cannot connect: a refusal, not a slow network.
			curl := func(url string, extra ...string) func(context.Context) (string, error) {
				return func(ctx context.Context) (string, error) {
					return run(ctx, "curl -sS -m 10 "+strings.Join(extra, " ")+" "+url)
				}
			}
			expectOutput(t, "https://example.test/ trusting the stand-in CA", curl("https://example.test/", "--cacert", caFile), "hello from example.test")
			expectOutput(t, "http://api.example.test/", curl("http://api.example.test/"), "hello from api.example.test")
			// The stand-in saw the sandbox itself (no NAT) asking for example.test by name.
			ip := sb.PodIPs()[0]
			reqs, err := stand.Requests(ctx, "example.test")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(reqs, func(r standin.Request) bool {
				host, _, _ := net.SplitHostPort(r.Remote)
				return host == ip && r.Scheme == "https" && r.SNI == "example.test"
			}) {
				t.Errorf("the stand-in's example.test saw no HTTPS request with SNI example.test from the sandbox %s: %+v", ip, reqs)
			}
			expectFailure(t, "an HTTPS host without the stand-in CA", curl("https://example.test/"))

			expectRefused(t, "pod open in the sandbox's own namespace", curl("http://"+servers["open"]+":8080/"))
			expectRefused(t, "pod stranger in "+outside, curl("http://"+servers["stranger"]+":8080/"))
			expectRefused(t, "the API server", curl("https://"+net.JoinHostPort(node, apiServerPort)+"/version", "-k"))
			expectRefused(t, "the kubelet", curl("https://"+net.JoinHostPort(node, kubeletPort)+"/pods", "-k"))
			expectFailure(t, "the node's DNS", func(ctx context.Context) (string, error) {
				return run(ctx, "python3 -c "+shellQuote(dnsQueryScript(node, "kubernetes.default.svc."+devcluster.ClusterDomain)))
			})
			// The same script answers against the stand-in's resolver: its failure above is the
			// policy's, not the script's.
			expectOutput(t, "the stand-in's DNS", func(ctx context.Context) (string, error) {
				return run(ctx, "python3 -c "+shellQuote(dnsQueryScript(plan.Resolver.String(), "example.test")))
			}, "answered")

			// Off the machine: the host routes nothing from the pod bridge but to the pod and
			// stand-in ranges. Asked of the routing table, so no packet is sent anywhere.
			for _, dst := range []string{"8.8.8.8", "1.1.1.1", "198.51.100.7"} {
				out, _ := exec.CommandContext(ctx, "ip", "-4", "route", "get", dst, "from", ip, "iif", "paddock-br").CombinedOutput()
				if !strings.Contains(strings.ToLower(string(out)), "unreachable") {
					t.Errorf("ip route get %s from sandbox %s iif paddock-br = %q; want unreachable", dst, ip, out)
				}
			}
		})
	}
}

// claimFromPool waits for pool template in ns to have a ready member, claims it (released when
// the test ends), and returns it with a runner of shell commands in it, as the sandbox's own code
// would run them: the output, and an error naming a non-zero exit code.
func claimFromPool(t *testing.T, ctx context.Context, paddock *sdk.Client, c client.Client, ns, template string) (*sdk.Sandbox, func(context.Context, string) (string, error)) {
	t.Helper()
	waitPoolReady(t, c, ns, template, 1)
	sb, err := paddock.Claim(ctx, sdk.ClaimOptions{WarmPool: template, Namespace: ns})
	if err != nil {
		t.Fatalf("claim from %s: %v", template, err)
	}
	t.Cleanup(func() { _ = sb.Release(context.Background()) })
	rt, err := sb.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	return sb, func(ctx context.Context, cmd string) (string, error) {
		res, err := rt.Run(ctx, cmd)
		if err != nil {
			return "", err
		}
		out := res.Stdout + res.Stderr
		if res.ExitCode != 0 {
			return out, fmt.Errorf("exit code %d: %s", res.ExitCode, strings.TrimSpace(out))
		}
		return out, nil
	}
}

// copyTemplateOnRunc copies template name in ns to name-runc without a RuntimeClass.
func copyTemplateOnRunc(t *testing.T, ctx context.Context, c client.Client, ns, name string) string {
	t.Helper()
	var tpl extensionsv1beta1.SandboxTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tpl); err != nil {
		t.Fatal(err)
	}
	runc := &extensionsv1beta1.SandboxTemplate{}
	runc.Name, runc.Namespace, runc.Annotations, runc.Spec = name+"-runc", ns, tpl.Annotations, *tpl.Spec.DeepCopy()
	runc.Spec.PodTemplate.Spec.RuntimeClassName = nil
	framework.MustCreate(t, ctx, c, runc)
	return runc.Name
}

// dnsQueryScript is Python that sends one A query for name to server over UDP and prints
// "answered" with the response code, or fails.
func dnsQueryScript(server, name string) string {
	return fmt.Sprintf(`import socket, struct, sys
q = struct.pack(">HHHHHH", 0x5050, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in %q.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(q, (%q, 53))
r = s.recv(512)
print("answered rcode", r[3] & 15)
`, name, server)
}

// expectOutput polls until do succeeds with want in its output.
func expectOutput(t *testing.T, what string, do func(context.Context) (string, error), want string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		out, err := do(ctx)
		if err != nil || !strings.Contains(out, want) {
			return fmt.Errorf("%s = %q, %v; want %q", what, out, err, want)
		}
		return nil
	})
}

// expectFailure polls until do fails: policies apply moments after a pod starts.
func expectFailure(t *testing.T, what string, do func(context.Context) (string, error)) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		if out, err := do(ctx); err == nil {
			return fmt.Errorf("%s succeeded: %q; want it refused", what, out)
		}
		return nil
	})
}

// expectRefused polls until curl (through do) cannot connect (exit code 7): refused at once by
// the policy, not timed out or answered.
func expectRefused(t *testing.T, what string, do func(context.Context) (string, error)) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		out, err := do(ctx)
		if err == nil || !strings.Contains(err.Error(), "exit code 7") {
			return fmt.Errorf("%s = %q, %v; want curl to fail to connect (exit code 7)", what, out, err)
		}
		return nil
	})
}
