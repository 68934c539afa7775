package cluster

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/test/framework"
)

// testEnvBase runs the first lines of real work with the unmodified E2B SDK in the `base`
// template that paddock dev up made (env-base under gVisor) and in a copy under runc: python3,
// node, git, curl and wget, pip install of a wheel the test serves and of a C extension, npm
// install of a local tarball. Nothing leaves the machine: the server listens on the node's
// address, pip runs with --no-index and npm with --offline, and no name is looked up.
func testEnvBase(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 25*time.Minute)
	c := paddockClient(t)

	copyE2BTemplate(t, ctx, c, ns, e2b.DefaultTemplate, true)
	var base extensionsv1beta1.SandboxTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: e2b.DefaultTemplate}, &base); err != nil {
		t.Fatal(err)
	}
	if img := base.Spec.PodTemplate.Spec.Containers[0].Image; !strings.Contains(img, "/paddock/env-base:") {
		t.Fatalf("paddock dev up's base template runs %s; want env-base", img)
	}
	rc := base.Spec.PodTemplate.Spec.RuntimeClassName
	if rc == nil || *rc != devcluster.GVisorRuntimeClass {
		t.Fatalf("paddock dev up's base template has RuntimeClass %v; want %s", rc, devcluster.GVisorRuntimeClass)
	}
	runc := copyTemplateOnRunc(t, ctx, c, ns, e2b.DefaultTemplate)
	for _, name := range []string{e2b.DefaultTemplate, runc} {
		framework.MustCreate(t, ctx, c, poolOf(ns, name, 1))
	}

	key, url := e2bAPIKey(t, ctx, c, ns), e2bURL(t, ctx, c)
	probe := "paddock-" + rand.String(12)
	nodeIP := nodeInternalIP(t, ctx)
	server := serveEnvFiles(t, nodeIP, probe)
	// The managed policy denies the node; a policy of the test's own admits its file server's
	// port, as an operator would admit a package mirror (NetworkPolicies add up).
	allowEnvFiles(t, ctx, ns, nodeIP, server)
	dir := e2bClientDir(t)
	env := append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key,
		"E2B_PKG="+e2bSDKs[0], "SERVER_URL="+server, "PROBE="+probe)
	for _, tc := range []struct{ runtime, template string }{{"gVisor", e2b.DefaultTemplate}, {"runc", runc}} {
		t.Run(tc.runtime, func(t *testing.T) {
			waitPoolReady(t, c, ns, tc.template, 1)
			out, err := node(t, ctx, dir, append(env, "E2B_TEMPLATE="+tc.template), "envbase.mjs")
			if err != nil || !strings.Contains(out, "all checks passed") {
				t.Fatalf("env-base under %s: %v", tc.runtime, err)
			}
		})
	}
}

// allowEnvFiles lets every pod of ns reach the file server at serverURL on the node.
func allowEnvFiles(t *testing.T, ctx context.Context, ns, node, serverURL string) {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("the env-base file server %s has no port: %v", serverURL, err)
	}
	tcp := corev1.ProtocolTCP
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "env-files", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: node + "/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt(port))}},
			}},
		},
	}
	if _, err := suite.client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// serveEnvFiles serves, on an ephemeral port of the node's address (which sandboxes reach over the
// pod network): /hello with probe, and /wheels/, a pip find-links page with one pure-Python wheel
// whose module holds probe. It returns the server's base URL.
func serveEnvFiles(t *testing.T, nodeIP, probe string) string {
	t.Helper()
	const wheelName = "paddock_probe-1.0-py3-none-any.whl"
	wheel, err := makeWheel("paddock_probe", "1.0", map[string]string{"paddock_probe/__init__.py": fmt.Sprintf("VALUE = %q\n", probe)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, probe) })
	mux.HandleFunc("GET /wheels/{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=%q>%s</a></body></html>\n", wheelName, wheelName)
	})
	mux.HandleFunc("GET /wheels/"+wheelName, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(wheel) })
	l, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("the env-base test server: %v", err)
		}
	}()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return "http://" + l.Addr().String()
}

// makeWheel builds a pure-Python wheel of the distribution name and version holding files (path
// in the wheel to content), with the metadata and the RECORD of hashes pip checks.
func makeWheel(name, version string, files map[string]string) ([]byte, error) {
	info := name + "-" + version + ".dist-info/"
	all := map[string]string{
		info + "METADATA": "Metadata-Version: 2.1\nName: " + strings.ReplaceAll(name, "_", "-") + "\nVersion: " + version + "\n",
		info + "WHEEL":    "Wheel-Version: 1.0\nGenerator: paddock-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	for p, content := range files {
		all[p] = content
	}
	var record strings.Builder
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	write := func(p, content string) error {
		w, err := zw.Create(p)
		if err != nil {
			return err
		}
		_, err = w.Write([]byte(content))
		return err
	}
	for p, content := range all {
		sum := sha256.Sum256([]byte(content))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(content))
		if err := write(p, content); err != nil {
			return nil, err
		}
	}
	record.WriteString(info + "RECORD,,\n")
	if err := write(info+"RECORD", record.String()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
