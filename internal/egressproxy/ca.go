package egressproxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/internal/certauthority"
)

// Lifetimes of the CA and of the leaves it signs. Leaves are cached and re-issued well
// before they expire.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 7 * 24 * time.Hour
	leafRenew    = 24 * time.Hour
	maxLeaves    = 4096
)

// CA is the per-installation authority whose leaves a sandbox sees for the hosts whose
// requests get headers injected. Its certificate is what sandboxes trust; its key must stay on
// the nodes' egress component.
type CA struct {
	authority *certauthority.CA

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewCA makes a CA named commonName.
func NewCA(commonName string) (*CA, error) {
	a, err := certauthority.New(certauthority.Options{CommonName: commonName, Organization: "Paddock", Lifetime: caLifetime})
	if err != nil {
		return nil, err
	}
	return &CA{authority: a, leaves: map[string]*tls.Certificate{}}, nil
}

// LoadCA reads a CA from PEM (as NewCA's CertPEM and KeyPEM write it).
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	a, err := certauthority.Load(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	return &CA{authority: a, leaves: map[string]*tls.Certificate{}}, nil
}

// CertPEM is the CA's certificate, for sandboxes to trust.
func (ca *CA) CertPEM() []byte { return ca.authority.CertPEM() }

// KeyPEM is the CA's private key, for the Secret that keeps it.
func (ca *CA) KeyPEM() []byte { return ca.authority.KeyPEM() }

// Pool is a pool holding only the CA's certificate.
func (ca *CA) Pool() *x509.CertPool { return ca.authority.Pool() }

// Leaf returns a server certificate for host (a name or an address), issued once and cached
// until it nears expiry.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok && time.Until(c.Leaf.NotAfter) > leafRenew {
		return c, nil
	}
	c, err := ca.authority.Issue(host, leafLifetime)
	if err != nil {
		return nil, err
	}
	if len(ca.leaves) >= maxLeaves { // wildcard rules name unboundedly many hosts
		clear(ca.leaves)
	}
	ca.leaves[host] = c
	return c, nil
}
