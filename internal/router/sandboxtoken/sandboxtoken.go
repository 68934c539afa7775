// Package sandboxtoken gives the router the sandbox token of each Sandbox it proxies to: it
// watches the one key Secret (credentials.KeySecretName, created by the controller) and derives
// tokens with credentials.SandboxToken. Watching, rather than reading once, lets a rotated or a
// late-created key take effect without a restart.
package sandboxtoken

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/paddock-dev/paddock/internal/credentials"
)

// Source derives sandbox tokens from the key in one Secret, kept current by an informer limited
// to that Secret (RBAC: get, list and watch on it by resourceNames).
type Source struct {
	secret   types.NamespacedName
	informer cache.SharedIndexInformer
	// key is the current key, or nil with keyErr saying why there is none.
	key atomic.Pointer[keyState]
}

type keyState struct {
	key []byte
	err error
}

// New returns a Source for the key Secret; call Run to start watching it.
func New(cs kubernetes.Interface, secret types.NamespacedName) *Source {
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "secrets", secret.Namespace,
		fields.OneTermEqualSelector("metadata.name", secret.Name))
	s := &Source{secret: secret, informer: cache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, cache.Indexers{})}
	s.key.Store(&keyState{err: s.missing()})
	_, _ = s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.observe(obj) },
		UpdateFunc: func(_, obj any) { s.observe(obj) },
		DeleteFunc: func(any) { s.key.Store(&keyState{err: s.missing()}) },
	})
	return s
}

// Run watches the Secret until ctx ends.
func (s *Source) Run(ctx context.Context) { s.informer.Run(ctx.Done()) }

// WaitForSync blocks until the first list is in or ctx ends, and reports which.
func (s *Source) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced)
}

// SandboxToken implements proxy.Credentials.
func (s *Source) SandboxToken(namespace, name string, uid types.UID) (string, error) {
	st := s.key.Load()
	if st.err != nil {
		return "", st.err
	}
	if uid == "" {
		return "", fmt.Errorf("sandbox %s/%s has no known UID, so the router cannot derive its token", namespace, name)
	}
	return credentials.SandboxToken(st.key, namespace, name, uid), nil
}

// KeyErr is nil once the key is known, else the client-facing reason no token can be derived.
func (s *Source) KeyErr() error { return s.key.Load().err }

func (s *Source) observe(obj any) {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	key, err := credentials.KeyFromSecret(secret)
	if err != nil {
		s.key.Store(&keyState{err: fmt.Errorf("the router cannot reach sandboxes with their tokens: %w", err)})
		return
	}
	s.key.Store(&keyState{key: key})
}

func (s *Source) missing() error {
	return fmt.Errorf("the credentials key Secret %s does not exist yet; paddock-controller creates it at start (check that it runs and that the router's --credentials-secret names the same Secret), then retry", s.secret)
}
