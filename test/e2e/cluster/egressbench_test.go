package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/standin"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/framework"
)

// Sizes of the egress benchmark: small requests per path, and the download.
const (
	egressBenchRequests = 300
	egressBenchDownload = 256 << 20
)

// testEgressBench measures the egress path from code in sandboxes on gVisor and runc, against
// the same requests from a sandbox with no policy (direct egress, through the node's routing
// only): the latency of a small HTTPS request on a new connection (name lookup included), when
// paddock-egress splices it after the SNI check and when it terminates TLS to inject a header;
// the throughput of a 256 MiB download over HTTP (proxied request by request) and HTTPS
// (spliced); and paddock-egress's CPU time per request, read from /proc before and after.
// Numbers are logged, never asserted (docs/performance/results.md).
func testEgressBench(t *testing.T) {
	cfg := devcluster.Defaults(cmp.Or(suite.stateDir, *stateDirFlag))
	if devcluster.EgressPID(cfg) == 0 {
		t.Skipf("no paddock-egress of paddock dev up runs for state dir %s (pass -state-dir)", cfg.StateDir)
	}
	ns := namespace(t)
	ctx := framework.Context(t, 20*time.Minute)
	c := paddockClient(t)
	standinCA, err := os.ReadFile(standin.CACertPath(filepath.Join(cfg.StateDir, "internet")))
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	framework.MustCreate(t, ctx, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api-key", Namespace: ns},
		Data: map[string][]byte{"authorization": []byte("Bearer bench-" + hex.EncodeToString(raw))}})
	policy := egress.Policy{
		Allow: []string{"example.test", "api.example.test"},
		Deny:  []string{egress.AllTraffic},
		Inject: []egress.InjectRule{{Domain: "api.example.test", Headers: []egress.Header{
			{Name: "Authorization", SecretKeyRef: egress.SecretKeyRef{Name: "api-key", Key: "authorization"}}}}},
	}
	gvisor, runc := policedTemplate(t, ctx, c, ns, policy)
	directGVisor, directRunc := unpolicedTemplates(t, ctx, c, ns)
	for _, name := range []string{gvisor, runc, directGVisor, directRunc} {
		framework.MustCreate(t, ctx, c, poolOf(ns, name, 1))
	}
	paddock, err := sdk.New(suite.restConfig, sdk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Every sandbox is claimed, and the pools have refilled, before anything is measured.
	type subject struct {
		runtime, path string
		via           bool
		run           func(cmd string) (string, error)
	}
	var subjects []subject
	for _, tc := range []struct{ runtime, policed, direct string }{{"gVisor", gvisor, directGVisor}, {"runc", runc, directRunc}} {
		for _, via := range []bool{false, true} {
			template, path := tc.direct, "direct"
			if via {
				template, path = tc.policed, "paddock-egress"
			}
			sb, runArgv := claimFromPool(t, ctx, paddock, c, ns, template)
			run := func(cmd string) (string, error) { return runArgv(ctx, "sh -c "+shellQuote(cmd)) }
			if via {
				waitEgressApplied(t, c, ns, sb.SandboxName())
			}
			if _, err := run(fmt.Sprintf("echo %s | base64 -d > /tmp/standin-ca.crt", base64.StdEncoding.EncodeToString(standinCA))); err != nil {
				t.Fatalf("writing the stand-in's CA into the sandbox: %v", err)
			}
			subjects = append(subjects, subject{tc.runtime, path, via, run})
		}
	}
	for _, name := range []string{gvisor, runc, directGVisor, directRunc} {
		waitPoolReady(t, c, ns, name, 1)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	var rows []string
	for _, tc := range subjects {
		path, via, run := tc.path, tc.via, tc.run
		hosts := []string{"example.test"}
		if via {
			hosts = append(hosts, "api.example.test") // terminated for injection
		}
		for _, host := range hosts {
			before, err := devcluster.EgressCPU(cfg)
			if err != nil {
				t.Fatal(err)
			}
			out, err := run("python3 -c " + shellQuote(httpsLatencyScript(host, egressBenchRequests)))
			if err != nil {
				t.Fatalf("%s on %s, %s: %v", path, tc.runtime, host, err)
			}
			after, err := devcluster.EgressCPU(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var lat struct {
				Seconds []float64 `json:"seconds"`
				Wall    float64   `json:"wall"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &lat); err != nil || len(lat.Seconds) != egressBenchRequests {
				t.Fatalf("%s on %s, %s: output %q: %v", path, tc.runtime, host, out, err)
			}
			slices.Sort(lat.Seconds)
			rate := float64(egressBenchRequests) / lat.Wall
			cpu := "-"
			if via {
				perThousand := (after - before).Seconds() / egressBenchRequests * 1000
				cpu = fmt.Sprintf("%.2f cores (%.0f ms in %d requests)", perThousand, float64((after - before).Milliseconds()), egressBenchRequests)
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | small HTTPS to %s | p50 %.2f ms, p99 %.2f ms (%.0f req/s) | %s |",
				tc.runtime, path, host, 1000*lat.Seconds[len(lat.Seconds)/2], 1000*lat.Seconds[len(lat.Seconds)*99/100], rate, cpu))
		}
		for _, scheme := range []string{"http", "https"} {
			var speeds []string
			for range 3 {
				out, err := run(fmt.Sprintf("curl -sS -m 300 --cacert /tmp/standin-ca.crt -o /dev/null -w '%%{speed_download} %%{size_download}' %s://example.test/bytes/%d", scheme, egressBenchDownload))
				var speed float64
				var size int64
				if _, perr := fmt.Sscan(out, &speed, &size); err != nil || perr != nil || size != egressBenchDownload {
					t.Fatalf("%s download on %s through %s: %q, %v", scheme, tc.runtime, path, out, err)
				}
				speeds = append(speeds, fmt.Sprintf("%.0f", speed/1e6))
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | 256 MiB over %s | %s MB/s | |", tc.runtime, path, strings.ToUpper(scheme), strings.Join(speeds, ", ")))
		}
	}
	after, _ := os.ReadFile("/proc/loadavg")
	t.Logf("egress path, load average before %s, after %s\n| runtime | path | what | result | paddock-egress CPU per 1,000 req/s |\n|---|---|---|---|---|\n%s",
		strings.Join(strings.Fields(string(load))[:3], " "), strings.Join(strings.Fields(string(after))[:3], " "), strings.Join(rows, "\n"))
}

// unpolicedTemplates copies the dev cluster's E2B base template into ns without any egress
// policy, on gVisor and on runc: sandboxes whose egress is direct.
func unpolicedTemplates(t *testing.T, ctx context.Context, c client.Client, ns string) (gvisor, runc string) {
	t.Helper()
	var dev extensionsv1beta1.SandboxTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: e2b.DefaultTemplate}, &dev); err != nil {
		t.Fatalf("the E2B template %s of paddock dev up: %v", e2b.DefaultTemplate, err)
	}
	for _, name := range []string{"direct", "direct-runc"} {
		tpl := &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: dev.Annotations},
			Spec: *dev.Spec.DeepCopy()}
		tpl.Spec.VolumeClaimTemplates = nil
		tpl.Spec.PodTemplate.Spec.Containers[0].VolumeMounts = nil
		delete(tpl.Spec.PodTemplate.ObjectMeta.Annotations, egress.PolicyAnnotation)
		if name == "direct-runc" {
			tpl.Spec.PodTemplate.Spec.RuntimeClassName = nil
		}
		framework.MustCreate(t, ctx, c, tpl)
	}
	return "direct", "direct-runc"
}

// httpsLatencyScript is Python that makes n HTTPS GETs to host, each on a new connection with
// its own name lookup, trusting the stand-in's CA and the sandbox's own trust (the egress CA
// when the sandbox is policed), and prints each one's seconds and the wall time as JSON.
func httpsLatencyScript(host string, n int) string {
	return fmt.Sprintf(`import http.client, json, os, ssl, time
ctx = ssl.create_default_context(cafile="/tmp/standin-ca.crt")
if os.environ.get("SSL_CERT_FILE"):
    ctx.load_verify_locations(os.environ["SSL_CERT_FILE"])
out = []
start = time.perf_counter()
for i in range(%d):
    t0 = time.perf_counter()
    c = http.client.HTTPSConnection(%q, 443, context=ctx, timeout=10)
    c.request("GET", "/?bench=%%d" %% i)
    r = c.getresponse()
    r.read()
    c.close()
    if r.status != 200:
        raise SystemExit("status %%d" %% r.status)
    out.append(time.perf_counter() - t0)
print(json.dumps({"seconds": out, "wall": time.perf_counter() - start}))
`, n, host)
}
