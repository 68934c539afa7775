package devcluster

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The kubelet serves only the API server and reviewed tokens: an anonymous request on the node
// address could otherwise run commands in every pod.
func TestKubeletAuthenticatesAndAuthorizes(t *testing.T) {
	var got struct {
		Authentication map[string]map[string]any `json:"authentication"`
		Authorization  map[string]any            `json:"authorization"`
		ReadOnlyPort   int                       `json:"readOnlyPort"`
	}
	if err := json.Unmarshal([]byte(kubeletConfig(testCfg)), &got); err != nil {
		t.Fatal(err)
	}
	want := []any{false, true, "/state/pki/ca.crt", "Webhook", 0}
	have := []any{got.Authentication["anonymous"]["enabled"], got.Authentication["webhook"]["enabled"],
		got.Authentication["x509"]["clientCAFile"], got.Authorization["mode"], got.ReadOnlyPort}
	if diff := cmp.Diff(want, have); diff != "" {
		t.Fatalf("kubelet anonymous, webhook, client CA, authorization mode, read-only port (-want +got):\n%s", diff)
	}
	args := pick(apiServerArgs(testCfg), "--kubelet-client-certificate", "--kubelet-client-key")
	if diff := cmp.Diff([]string{"--kubelet-client-certificate=/state/pki/" + kubeletClientCert, "--kubelet-client-key=/state/pki/" + kubeletClientKey}, args); diff != "" {
		t.Fatalf("API server's kubelet client flags (-want +got):\n%s", diff)
	}
}

// KWOK authenticates nobody: it listens on loopback only, without pprof or exec.
func TestKWOKIsNotOnThePodNetwork(t *testing.T) {
	if got := pick(kwokArgs(testCfg, nil), "--server-address"); !cmp.Equal(got, []string{"--server-address=127.0.0.1:10247"}) {
		t.Errorf("KWOK server address = %v, want loopback", got)
	}
	for _, want := range []string{"kind: KwokConfiguration", "enableDebuggingHandlers: false", "enableProfilingHandler: false"} {
		if !strings.Contains(kwokConfig(), want) {
			t.Errorf("KWOK configuration lacks %q:\n%s", want, kwokConfig())
		}
	}
}

// A state dir made before the kubelet required authentication gets the API server's client
// certificate on the next up, signed by the cluster CA it already has, in group system:masters.
func TestPKIAddsTheKubeletClientToAnOldStateDir(t *testing.T) {
	c := Defaults(t.TempDir())
	if err := ensurePKI(c); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(c.path("pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{kubeletClientCert, kubeletClientKey} {
		if err := os.Remove(c.path("pki", f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ensurePKI(c); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(c.path("pki", "ca.crt")); string(again) != string(ca) {
		t.Fatal("the second ensurePKI replaced the CA")
	}
	certPEM, err := os.ReadFile(filepath.Join(c.path("pki"), kubeletClientCert))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caBlock, _ := pem.Decode(ca)
	caCert, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the kubelet client certificate does not verify against the cluster CA for client auth: %v", err)
	}
	if diff := cmp.Diff([]string{"system:masters"}, cert.Subject.Organization); diff != "" {
		t.Errorf("groups of the kubelet client (-want +got):\n%s", diff)
	}
}
