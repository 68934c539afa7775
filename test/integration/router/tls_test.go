package router

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/server"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// writeServingPair writes a self-signed certificate for 127.0.0.1 into dir (by rename, as the
// kubelet's atomic writer does) and returns it.
func writeServingPair(t *testing.T, dir string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "paddock-router"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}, "tls.crt": {Type: "CERTIFICATE", Bytes: der}} {
		tmp := filepath.Join(dir, ".tmp-"+name)
		if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestHTTPSWithCertificateReload serves the proxy over TLS, replaces the certificate files while
// the router runs, and sees new connections get the new certificate without a restart.
func TestHTTPSWithCertificateReload(t *testing.T) {
	ns := env.Namespace(t)
	var proto atomic.Value
	port := upstreams(t, map[string]http.Handler{"127.0.0.12": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(r.Header.Get("X-Forwarded-Proto"))
		_, _ = io.WriteString(w, "secure")
	})})
	createSandbox(t, builder.MakeSandbox("secure", ns).Port("http", int32(port)).ReadyStatus("127.0.0.12"))
	dir := t.TempDir()
	first := writeServingPair(t, dir, 1)
	r := startRouter(t, func(c *router.Config) {
		c.Server.HTTPSAddr = "127.0.0.1:0"
		c.TLSCertFile, c.TLSKeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	})
	roots := x509.NewCertPool()
	roots.AddCert(first)

	// fetch opens a new TLS connection each time and returns the serving certificate's serial.
	fetch := func() (string, int64, error) {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}}
		req, _ := http.NewRequest(http.MethodGet, "https://"+r.Addr(server.ProxyHTTPS)+"/", nil)
		req.Header.Set("X-Sandbox-ID", "secure")
		req.Header.Set("X-Sandbox-Namespace", ns)
		req.Header.Set("X-Sandbox-Port", strconv.Itoa(port))
		resp, err := client.Do(req)
		if err != nil {
			return "", 0, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.TLS.PeerCertificates[0].SerialNumber.Int64(), nil
	}
	framework.Eventually(t, func(context.Context) error {
		body, serial, err := fetch()
		if err != nil || body != "secure" || serial != 1 {
			return fmt.Errorf("got %q from serial %d: %v", body, serial, err)
		}
		return nil
	})
	if got := proto.Load(); got != "https" {
		t.Errorf("upstream saw X-Forwarded-Proto %v, want https", got)
	}

	second := writeServingPair(t, dir, 2)
	roots.AddCert(second)
	framework.Eventually(t, func(context.Context) error {
		_, serial, err := fetch()
		if err != nil || serial != 2 {
			return fmt.Errorf("serving serial %d (%v), want 2 after the files changed", serial, err)
		}
		return nil
	})
	_, metrics, err := get(r.metricsURL + "/metrics")
	if err != nil || !strings.Contains(metrics, `sandbox_router_cert_reloads_total{outcome="success"}`) {
		t.Errorf("no successful reload in the metrics (%v)", err)
	}
}
