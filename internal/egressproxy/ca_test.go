package egressproxy

import (
	"crypto/x509"
	"strings"
	"testing"
)

// The certificate authority itself is tested in internal/certauthority; here, what the proxy
// adds: leaves cached per host, and errors that say which CA is wrong.
func TestCALeavesAreCachedPerHost(t *testing.T) {
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
	if cached, _ := again.Leaf("api.example.test"); cached != leaf {
		t.Error("a second Leaf for the same name issued a new certificate")
	}
	if other, _ := again.Leaf("other.example.test"); other == leaf {
		t.Error("another name got the first name's leaf")
	}
}

func TestLoadCANamesTheEgressCA(t *testing.T) {
	a, _ := NewCA("a")
	b, _ := NewCA("b")
	if _, err := LoadCA(a.CertPEM(), b.KeyPEM()); err == nil || !strings.HasPrefix(err.Error(), "egress CA: ") || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("LoadCA with another CA's key = %v; want an egress CA error saying the key does not match", err)
	}
}
