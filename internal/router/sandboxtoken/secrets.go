package sandboxtoken

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/credentials"
)

// SecretSource gives the router each Sandbox's token from the per-Sandbox Secret
// "<sandbox>-credentials" that the controller writes into the Sandbox's namespace, so a router
// that serves only some namespaces (a per-namespace router) never holds the installation's key.
// It reads what the claim's holder may read already and nothing more: the informers watch only
// the listed namespaces and only Secrets carrying the Sandbox tracking label, and keep only the
// sandbox token of each, never the control token.
type SecretSource struct {
	listers   map[string]listersv1.SecretLister
	informers []cache.SharedIndexInformer
}

// NewSecretSource returns a SecretSource over the namespaces; call Run to start watching.
func NewSecretSource(cs kubernetes.Interface, namespaces []string) (*SecretSource, error) {
	if len(namespaces) == 0 {
		return nil, fmt.Errorf("reading sandbox tokens from per-Sandbox Secrets needs the namespaces to watch (--sandbox-namespaces); " +
			"watching Secrets in every namespace is what this source exists to avoid")
	}
	s := &SecretSource{listers: map[string]listersv1.SecretLister{}}
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = agentsv1beta1.SandboxNameHashLabel }))
		inf := f.Core().V1().Secrets()
		if err := inf.Informer().SetTransform(keepSandboxToken); err != nil {
			return nil, fmt.Errorf("trimming the Secret cache of %s: %w", ns, err)
		}
		s.listers[ns] = inf.Lister()
		s.informers = append(s.informers, inf.Informer())
	}
	return s, nil
}

// keepSandboxToken drops everything but what SandboxToken reads: the name, the owner references
// and the sandbox token. The control token is only the controller's (docs/design/credentials.md).
func keepSandboxToken(obj any) (any, error) {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: secret.Name, Namespace: secret.Namespace, UID: secret.UID, ResourceVersion: secret.ResourceVersion,
		OwnerReferences: secret.OwnerReferences,
	}}
	if token, ok := secret.Data[credentials.TokenDataKey]; ok {
		trimmed.Data = map[string][]byte{credentials.TokenDataKey: token}
	}
	return trimmed, nil
}

// Run watches the Secrets until ctx ends.
func (s *SecretSource) Run(ctx context.Context) {
	for _, inf := range s.informers {
		go inf.Run(ctx.Done())
	}
	<-ctx.Done()
}

// WaitForSync blocks until every namespace's first list is in or ctx ends, and reports which.
func (s *SecretSource) WaitForSync(ctx context.Context) bool {
	synced := make([]cache.InformerSynced, 0, len(s.informers))
	for _, inf := range s.informers {
		synced = append(synced, inf.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// KeyErr is always nil: there is no key to wait for; a missing Secret is reported per Sandbox.
func (s *SecretSource) KeyErr() error { return nil }

// SandboxToken implements proxy.Credentials: the token in the Sandbox's Secret, provided the
// Secret is owned by this very Sandbox (its UID), so the Secret of a deleted Sandbox of the same
// name, or one somebody else wrote, is never presented.
func (s *SecretSource) SandboxToken(namespace, name string, uid types.UID) (string, error) {
	lister, ok := s.listers[namespace]
	if !ok {
		return "", fmt.Errorf("this router reads sandbox tokens only in namespaces %v, not %s", s.namespaces(), namespace)
	}
	secretName := credentials.SandboxSecretName(name)
	secret, err := lister.Secrets(namespace).Get(secretName)
	if err != nil {
		return "", fmt.Errorf("sandbox %s/%s: its credentials Secret %s is not readable yet (the controller creates it with the Sandbox): %w", namespace, name, secretName, err)
	}
	if uid == "" || !ownedBy(secret, uid) {
		return "", fmt.Errorf("sandbox %s/%s: Secret %s is not owned by the Sandbox with UID %q; the controller re-creates it for the current Sandbox, retry", namespace, name, secretName, uid)
	}
	token := secret.Data[credentials.TokenDataKey]
	if len(token) == 0 {
		return "", fmt.Errorf("sandbox %s/%s: Secret %s has no %q", namespace, name, secretName, credentials.TokenDataKey)
	}
	return string(token), nil
}

func ownedBy(secret *corev1.Secret, uid types.UID) bool {
	for _, ref := range secret.OwnerReferences {
		if ref.UID == uid && ref.Kind == "Sandbox" {
			return true
		}
	}
	return false
}

func (s *SecretSource) namespaces() []string {
	return slices.Sorted(maps.Keys(s.listers))
}
