package resolve

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// Cache is an informer cache of Sandboxes, trimmed to the fields routing reads.
type Cache struct{ c cache.Cache }

var _ Lookup = (*Cache)(nil)

// NewCache builds a Sandbox informer cache over every namespace, or only the given ones. It does
// not start it; call Start.
func NewCache(cfg *rest.Config, namespaces []string) (*Cache, error) {
	scheme := k8sruntime.NewScheme()
	if err := agentsv1beta1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering Sandbox types: %w", err)
	}
	opts := cache.Options{
		Scheme: scheme,
		ByObject: map[client.Object]cache.ByObject{
			&agentsv1beta1.Sandbox{}: {Transform: trimSandbox},
		},
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating Sandbox informer cache: %w", err)
	}
	// Register the informer now so Start lists and watches Sandboxes before the first request.
	if _, err := c.GetInformer(context.Background(), &agentsv1beta1.Sandbox{}, cache.BlockUntilSynced(false)); err != nil {
		return nil, fmt.Errorf("creating Sandbox informer: %w", err)
	}
	return &Cache{c: c}, nil
}

// Start runs the informers until ctx ends.
func (c *Cache) Start(ctx context.Context) error { return c.c.Start(ctx) }

// WaitForSync blocks until the initial list is in or ctx ends, and reports which.
func (c *Cache) WaitForSync(ctx context.Context) bool { return c.c.WaitForCacheSync(ctx) }

// Sandbox returns the cached Sandbox, or nil when the cache holds none by that name.
func (c *Cache) Sandbox(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error) {
	var sb agentsv1beta1.Sandbox
	err := c.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sb)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Sandbox %s/%s from the informer cache: %w", namespace, name, err)
	}
	return &sb, nil
}

// trimSandbox drops what routing never reads (the pod template can be large, and managed fields
// are larger still) so a router watching thousands of Sandboxes stays small.
func trimSandbox(obj any) (any, error) {
	sb, ok := obj.(*agentsv1beta1.Sandbox)
	if !ok {
		return obj, nil
	}
	sb.ManagedFields = nil
	sb.Annotations = nil
	sb.Spec = agentsv1beta1.SandboxSpec{}
	return sb, nil
}
