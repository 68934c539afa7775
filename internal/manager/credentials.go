package manager

import (
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/credentials"
)

// DefaultNamespace is the controller's namespace when it runs outside a Pod.
const DefaultNamespace = "paddock-system"

// serviceAccountNamespaceFile holds the namespace of the Pod the controller runs in.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the namespace of the Pod the controller runs in, DefaultNamespace outside one.
func ownNamespace() string {
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return DefaultNamespace
}

// credentialsSecretKey is --credentials-secret as namespace and name: empty means
// credentials.KeySecretName in the controller's own namespace.
func (o *Options) credentialsSecretKey() (types.NamespacedName, error) {
	if o.CredentialsSecret == "" {
		return types.NamespacedName{Namespace: ownNamespace(), Name: credentials.KeySecretName}, nil
	}
	ns, name, ok := strings.Cut(o.CredentialsSecret, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("--credentials-secret=%q: want namespace/name, for example %s/%s, or empty for %s in the controller's namespace",
			o.CredentialsSecret, DefaultNamespace, credentials.KeySecretName, credentials.KeySecretName)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// EnsureCredentialsKey returns the installation's credentials key from the Secret key, creating
// the Secret with a fresh key when it does not exist: the controller is its only creator. reader
// must read past the cache (the manager has not started yet); c creates. Two replicas starting
// at once both end up with the key of whichever created it.
func EnsureCredentialsKey(ctx context.Context, reader client.Reader, c client.Client, key types.NamespacedName) ([]byte, error) {
	secret := &corev1.Secret{}
	err := reader.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		fresh, kerr := credentials.NewKey()
		if kerr != nil {
			return nil, kerr
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{credentials.KeySecretDataKey: fresh},
		}
		if err = c.Create(ctx, secret); err == nil {
			ctrl.LoggerFrom(ctx).Info("Created the credentials key", "secret", key.String())
			return fresh, nil
		}
		if apierrors.IsAlreadyExists(err) {
			secret = &corev1.Secret{}
			err = reader.Get(ctx, key, secret)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading or creating the credentials key Secret %s (--credentials-secret; the controller needs get and create on it): %w", key, err)
	}
	return credentials.KeyFromSecret(secret)
}
