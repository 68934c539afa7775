package standin

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock/internal/certauthority"
)

// The CA's files in the state directory. The certificate is world-readable: tests and images
// trust it; the key is root's.
const (
	CACertFile = "ca.crt"
	caKeyFile  = "ca.key"
)

// CACertPath is the stand-in CA's certificate in dir, the state directory given to Run.
func CACertPath(dir string) string { return filepath.Join(dir, CACertFile) }

// authority signs the hosts' certificates.
type authority struct{ *certauthority.CA }

// ensureCA reads the CA from dir, making it first when dir has none.
func ensureCA(dir string) (*authority, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(CACertPath(dir)); errors.Is(err, fs.ErrNotExist) {
		if err := writeCA(dir); err != nil {
			return nil, fmt.Errorf("create the stand-in CA in %s: %w", dir, err)
		}
	}
	return readCA(dir)
}

func writeCA(dir string) error {
	ca, err := certauthority.New(certauthority.Options{
		CommonName: "paddock dev internet stand-in CA", Organization: "paddock-dev", Lifetime: 10 * 365 * 24 * time.Hour,
		// The CA signs stand-in names only: a client that trusts it trusts nothing else.
		PermittedDNSDomains: []string{TLD},
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, caKeyFile), ca.KeyPEM(), 0o600); err != nil {
		return err
	}
	// The certificate last: its presence marks the pair as complete.
	return os.WriteFile(CACertPath(dir), ca.CertPEM(), 0o644)
}

func readCA(dir string) (*authority, error) {
	certPEM, err := os.ReadFile(CACertPath(dir))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, err
	}
	ca, err := certauthority.Load(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the stand-in CA (%s, %s in %s): %w; remove both to make a new CA", CACertFile, caKeyFile, dir, err)
	}
	return &authority{ca}, nil
}

// issue signs a serving certificate for host's name, with the CA certificate as its chain.
func (a *authority) issue(h Host) (*tls.Certificate, error) {
	return a.Issue(h.Name, 365*24*time.Hour)
}
