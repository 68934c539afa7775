package tlsreload

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func writePair(t *testing.T, dir, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{cn}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Write to temporary names and rename, as an atomic writer would.
	for name, block := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func commonName(t *testing.T, r *Reloader) string {
	t.Helper()
	c, _ := r.GetCertificate(&tls.ClientHelloInfo{})
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Subject.CommonName
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir, "first.test")
	r, err := New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	var failures, successes atomic.Int32
	r.OnReload = func(err error) {
		if err != nil {
			failures.Add(1)
		} else {
			successes.Add(1)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, err := r.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	if got := commonName(t, r); got != "first.test" {
		t.Fatalf("initial certificate %q", got)
	}

	writePair(t, dir, "second.test")
	// OnReload runs after the swap, so wait for both.
	waitFor(t, func() bool { return commonName(t, r) == "second.test" && successes.Load() > 0 })

	// A broken key must not replace the serving pair.
	before := failures.Load()
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return failures.Load() > before })
	if got := commonName(t, r); got != "second.test" {
		t.Errorf("after a broken update the certificate is %q, want second.test kept", got)
	}
}

func TestNewFailsOnMissingFiles(t *testing.T) {
	_, err := New("/nonexistent/tls.crt", "/nonexistent/tls.key", logr.Discard())
	if err == nil {
		t.Fatal("New succeeded without files")
	}
}

// waitFor polls cond with a deadline; it is a correctness bound, not a speed check.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
