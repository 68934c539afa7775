package egressproxy

import (
	"crypto/x509"
	"strings"
	"testing"
)

func TestCALeavesVerifyForTheirNameOnly(t *testing.T) {
	ca, err := NewCA("paddock egress")
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadCA(ca.CertPEM(), ca.KeyPEM())
	if err != nil {
		t.Fatalf("LoadCA of NewCA's own PEM: %v", err)
	}
	leaf, err := again.Leaf("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	opts := x509.VerifyOptions{Roots: ca.Pool(), DNSName: "api.example.test", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := leaf.Leaf.Verify(opts); err != nil {
		t.Errorf("the leaf does not verify against the CA it came from: %v", err)
	}
	opts.DNSName = "other.example.test"
	if _, err := leaf.Leaf.Verify(opts); err == nil {
		t.Error("the leaf verifies for another name")
	}
	if cached, _ := again.Leaf("api.example.test"); cached != leaf {
		t.Error("a second Leaf for the same name issued a new certificate")
	}
	other, err := NewCA("another installation")
	if err != nil {
		t.Fatal(err)
	}
	opts.DNSName, opts.Roots = "api.example.test", other.Pool()
	if _, err := leaf.Leaf.Verify(opts); err == nil {
		t.Error("the leaf verifies against another installation's CA")
	}
}

func TestLoadCARejects(t *testing.T) {
	a, _ := NewCA("a")
	b, _ := NewCA("b")
	leaf, _ := a.Leaf("x.test")
	for name, tc := range map[string]struct {
		cert, key []byte
		want      string
	}{
		"not PEM":          {[]byte("x"), a.KeyPEM(), "not a PEM CERTIFICATE"},
		"key of another":   {a.CertPEM(), b.KeyPEM(), "does not match"},
		"key not PEM":      {a.CertPEM(), []byte("x"), "not a PEM EC PRIVATE KEY"},
		"leaf is not a CA": {pemCert(leaf.Certificate[0]), a.KeyPEM(), "not a CA"},
	} {
		if _, err := LoadCA(tc.cert, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}
