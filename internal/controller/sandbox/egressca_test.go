package sandbox

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// TestPublicRootsAreMozillasUnconstrainedRoots: the bundle is a PEM list of CA certificates, as
// many as a distribution's ca-certificates holds, so that a policed sandbox still verifies the
// hosts it reaches without interception.
func TestPublicRootsAreMozillasUnconstrainedRoots(t *testing.T) {
	rest := PublicRoots()
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("root %d: %v", n, err)
		}
		if !c.IsCA {
			t.Errorf("root %d (%s) is not a CA", n, c.Subject)
		}
		n++
	}
	if len(rest) != 0 {
		t.Errorf("%d bytes after the last certificate", len(rest))
	}
	if n < 100 {
		t.Errorf("%d roots, want Mozilla's set (well over 100)", n)
	}
}
