package certauthority

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"time"
)

// Options describe a new CA.
type Options struct {
	// CommonName and Organization name it.
	CommonName, Organization string
	// Lifetime is how long it is valid from now (it is valid from an hour ago, for clocks that
	// lag).
	Lifetime time.Duration
	// PermittedDNSDomains, when set, limits it to those domains and their subdomains (a
	// critical name constraint): a client that trusts it trusts it for nothing else.
	PermittedDNSDomains []string
}

// CA is a certificate authority with its key.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// New makes a CA.
func New(o Options) (*CA, error) {
	if o.CommonName == "" || o.Lifetime <= 0 {
		return nil, errors.New("certauthority: a CA needs a CommonName and a positive Lifetime")
	}
	tmpl := template(pkix.Name{CommonName: o.CommonName, Organization: []string{o.Organization}}, o.Lifetime)
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	tmpl.BasicConstraintsValid, tmpl.IsCA, tmpl.MaxPathLenZero = true, true, true
	if len(o.PermittedDNSDomains) > 0 {
		tmpl.PermittedDNSDomainsCritical = true
		tmpl.PermittedDNSDomains = o.PermittedDNSDomains
	}
	der, key, err := sign(tmpl, nil, nil)
	if err != nil {
		return nil, err
	}
	return Load(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM(key))
}

// Load reads a CA from its PEM certificate and PEM EC private key (as CertPEM and KeyPEM write
// them), checking that the certificate is a CA's and that the key is its key.
func Load(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("the certificate is not a PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("the certificate is not a CA (basicConstraints CA:TRUE)")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "EC PRIVATE KEY" {
		return nil, errors.New("the key is not a PEM EC PRIVATE KEY block")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("the key does not match the certificate")
	}
	return &CA{cert: cert, key: key, certPEM: certPEM}, nil
}

// Certificate is the CA's parsed certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM is the CA's certificate: what clients trust.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// KeyPEM is the CA's private key, for whatever keeps it.
func (ca *CA) KeyPEM() []byte { return keyPEM(ca.key) }

// Pool is a pool holding only the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Issue signs a TLS server certificate for host (a DNS name, or an IP address) valid for
// lifetime from now; its chain holds the leaf and the CA's certificate, and Leaf is set.
func (ca *CA) Issue(host string, lifetime time.Duration) (*tls.Certificate, error) {
	tmpl := template(pkix.Name{CommonName: host}, lifetime)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if a, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, a.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, key, err := sign(tmpl, ca.cert, ca.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// template is a certificate for subject, valid from an hour ago (for clocks that lag) until
// lifetime from now.
func template(subject pkix.Name, lifetime time.Duration) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial(), Subject: subject, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(lifetime)}
}

// sign makes a new key and signs tmpl for it by parent's key, or by itself when parent is nil.
func sign(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	return der, key, err
}

func keyPEM(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil { // cannot happen for a P-256 key
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
