package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/paddock-dev/paddock/internal/bench"
	"github.com/paddock-dev/paddock/test/framework"
)

// writeKubeconfig writes a kubeconfig file for cfg, as a user of the command would have one.
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCommand runs the harness the way paddock-bench does, from options and a kubeconfig file,
// with one small scenario of each kind.
func TestCommand(t *testing.T) {
	startControllers(t)
	kubelet, err := startKubeletStandIn(env.Config, env.Client, *workers, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kubelet.stop)

	o := bench.NewOptions()
	o.Kubeconfig = writeKubeconfig(t, env.Config)
	o.PoolSize, o.Count, o.Rates, o.Cold = 3, 4, "burst", 3
	o.Out = t.TempDir()
	// A document with a generated section, as docs/performance.md has for `make bench`.
	docDir := t.TempDir()
	o.Doc = filepath.Join(docDir, "performance.md")
	handWritten := "# Performance\n\nBy hand.\n\n"
	if err := os.WriteFile(o.Doc, []byte(handWritten+bench.DocMarkers()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := framework.Context(t, framework.DefaultTimeout*5)
	report, err := bench.Execute(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	scenarios := o.Scenarios()
	if len(report.Scenarios) != len(scenarios) {
		t.Fatalf("report has %d scenarios, want %d", len(report.Scenarios), len(scenarios))
	}
	for i, s := range scenarios {
		checkResult(t, s, report.Scenarios[i])
	}
	for _, name := range []string{"report.json", "report.md", "scenario-1.svg", "scenario-2.svg", "percentiles.svg"} {
		if _, err := os.Stat(filepath.Join(o.Out, name)); err != nil {
			t.Errorf("output %s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(docDir, "bench", name)); strings.HasSuffix(name, ".svg") && err != nil {
			t.Errorf("plot for the document %s: %v", name, err)
		}
	}
	doc, err := os.ReadFile(o.Doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{handWritten, "| warm burst, 4 claims, pool 3 | 4 | 4 |", "![latency percentiles by claim rate](bench/percentiles.svg)"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the document lacks %q:\n%s", want, doc)
		}
	}
}
