package egressnode

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/egressproxy"
)

// LoadOrCreateCA reads the installation's egress CA from Secret key (tls.crt, tls.key),
// creating it when it is missing. Nodes starting together race to create it; the losers read
// the winner's, so every node signs with one CA.
func LoadOrCreateCA(ctx context.Context, c client.Client, key types.NamespacedName) (*egressproxy.CA, error) {
	var s corev1.Secret
	err := c.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		ca, cerr := egressproxy.NewCA("Paddock egress CA")
		if cerr != nil {
			return nil, cerr
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: ca.CertPEM(), corev1.TLSPrivateKeyKey: ca.KeyPEM()},
		}
		switch cerr := c.Create(ctx, &s); {
		case cerr == nil:
			return ca, nil
		case !apierrors.IsAlreadyExists(cerr):
			return nil, fmt.Errorf("creating the egress CA Secret %s: %w", key, cerr)
		}
		err = c.Get(ctx, key, &s) // another node made it first: use that one
	}
	if err != nil {
		return nil, fmt.Errorf("reading the egress CA Secret %s: %w", key, err)
	}
	ca, err := egressproxy.LoadCA(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("egress CA Secret %s: %w (delete it to have a new CA made; sandboxes must then trust the new certificate)", key, err)
	}
	return ca, nil
}
