package certauthority

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"
)

func newCA(t *testing.T, o Options) *CA {
	t.Helper()
	if o.CommonName == "" {
		o.CommonName = "test CA"
	}
	if o.Lifetime == 0 {
		o.Lifetime = time.Hour
	}
	ca, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestLeavesVerifyForTheirNameOrAddressOnly(t *testing.T) {
	ca := newCA(t, Options{})
	again, err := Load(ca.CertPEM(), ca.KeyPEM())
	if err != nil {
		t.Fatalf("Load of New's own PEM: %v", err)
	}
	verify := func(roots *x509.CertPool, c *x509.Certificate, name string) error {
		_, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err
	}
	leaf, err := again.Issue("api.example.test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(leaf.Certificate) != 2 || string(leaf.Certificate[1]) != string(ca.Certificate().Raw) {
		t.Errorf("the chain has %d certificates; want the leaf and the CA", len(leaf.Certificate))
	}
	if err := verify(ca.Pool(), leaf.Leaf, "api.example.test"); err != nil {
		t.Errorf("the leaf does not verify against the CA it came from: %v", err)
	}
	if verify(ca.Pool(), leaf.Leaf, "other.example.test") == nil {
		t.Error("the leaf verifies for another name")
	}
	if verify(newCA(t, Options{}).Pool(), leaf.Leaf, "api.example.test") == nil {
		t.Error("the leaf verifies against another CA")
	}
	byIP, err := ca.Issue("198.19.64.10", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(byIP.Leaf.IPAddresses) != 1 || !byIP.Leaf.IPAddresses[0].Equal(net.ParseIP("198.19.64.10")) || len(byIP.Leaf.DNSNames) != 0 {
		t.Errorf("a leaf for an address has IPs %v and names %v; want the address alone", byIP.Leaf.IPAddresses, byIP.Leaf.DNSNames)
	}
	if err := verify(ca.Pool(), byIP.Leaf, "198.19.64.10"); err != nil {
		t.Errorf("the address's leaf does not verify for it: %v", err)
	}
}

// With PermittedDNSDomains the CA vouches for nothing else, even what it signed itself.
func TestPermittedDNSDomains(t *testing.T) {
	ca := newCA(t, Options{PermittedDNSDomains: []string{"test"}})
	for name, ok := range map[string]bool{"example.test": true, "api.example.test": true, "example.com": false} {
		leaf, err := ca.Issue(name, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name})
		if ok && err != nil {
			t.Errorf("%s, under the permitted domain, does not verify: %v", name, err)
		}
		if !ok && err == nil {
			t.Errorf("%s verifies against a CA limited to .test", name)
		}
	}
}

func TestRejects(t *testing.T) {
	a, b := newCA(t, Options{}), newCA(t, Options{})
	leaf, _ := a.Issue("x.test", time.Hour)
	leafPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]})
	for name, tc := range map[string]struct {
		cert, key []byte
		want      string
	}{
		"not PEM":          {[]byte("x"), a.KeyPEM(), "not a PEM CERTIFICATE"},
		"key of another":   {a.CertPEM(), b.KeyPEM(), "does not match"},
		"key not PEM":      {a.CertPEM(), []byte("x"), "not a PEM EC PRIVATE KEY"},
		"leaf is not a CA": {leafPEM, a.KeyPEM(), "not a CA"},
	} {
		if _, err := Load(tc.cert, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
	if _, err := New(Options{CommonName: "x"}); err == nil {
		t.Error("New without a Lifetime succeeded")
	}
}
