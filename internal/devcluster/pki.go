package devcluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ensurePKI creates, once, the cluster's CA, the API server's serving certificate, the
// service-account key pair and the static tokens. Existing files are kept, so a second `up`
// leaves every issued token and kubeconfig valid.
func ensurePKI(c Config) error {
	dir := c.path("pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if !exists(filepath.Join(dir, "ca.crt")) {
		if err := writeCA(c, dir); err != nil {
			return fmt.Errorf("create the cluster CA in %s: %w", dir, err)
		}
	}
	if !exists(filepath.Join(dir, "sa.key")) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return err
		}
		pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub); err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)); err != nil {
			return err
		}
	}
	// Its own check: state dirs made before the kubelet required authentication lack it.
	if !exists(filepath.Join(dir, kubeletClientCert)) {
		if err := writeKubeletClient(dir); err != nil {
			return fmt.Errorf("create the API server's kubelet client certificate in %s: %w", dir, err)
		}
	}
	if !exists(filepath.Join(dir, "tokens.csv")) {
		t := tokens{Admin: randomToken(), Kubelet: randomToken()}
		if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokenFile(t)), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func writeCA(c Config, dir string) error {
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "paddock-dev-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     apiServerDNSNames(),
		IPAddresses:  []net.IP{net.IP(c.NodeIP.AsSlice()), net.IP(c.kubernetesServiceIP().AsSlice()), net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	files := []struct {
		name, typ string
		der       []byte
	}{
		{"apiserver.crt", "CERTIFICATE", der},
		{"apiserver.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)},
		{"ca.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(caKey)},
		// The CA certificate last: its presence marks the whole set as complete.
		{"ca.crt", "CERTIFICATE", caDER},
	}
	for _, f := range files {
		if err := writePEM(filepath.Join(dir, f.name), f.typ, f.der); err != nil {
			return err
		}
	}
	return nil
}

// The API server's client certificate for the kubelet.
const (
	kubeletClientCert = "apiserver-kubelet-client.crt"
	kubeletClientKey  = "apiserver-kubelet-client.key"
)

// writeKubeletClient signs, with the cluster CA, the certificate the API server presents to the
// kubelet: group system:masters, so the kubelet's webhook authorization allows it everything.
func writeKubeletClient(dir string) error {
	ca, caKey, err := readCA(dir)
	if err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, kubeletClientKey), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)); err != nil {
		return err
	}
	// The certificate last: its presence marks the pair as complete.
	return writePEM(filepath.Join(dir, kubeletClientCert), "CERTIFICATE", der)
}

// readCA reads the cluster CA's certificate and key.
func readCA(dir string) (*x509.Certificate, *rsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, nil, err
	}
	certBlock, _ := pem.Decode(certPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if certBlock == nil || keyBlock == nil {
		return nil, nil, fmt.Errorf("ca.crt or ca.key in %s is not PEM; remove the state dir (paddock dev down) to start afresh", dir)
	}
	ca, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParsePKCS1PrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

func apiServerDNSNames() []string {
	return []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain}
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// readTokens reads the static tokens ensurePKI wrote.
func readTokens(c Config) (tokens, error) {
	data, err := os.ReadFile(c.path("pki", "tokens.csv"))
	if err != nil {
		return tokens{}, err
	}
	return parseTokenFile(string(data))
}
