package resolve

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
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
	// The cache only ever holds Sandboxes, so a fixed mapper serves; the discovery-backed default
	// cost a cache with listed namespaces about 80 allocations per lookup.
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{agentsv1beta1.GroupVersion})
	mapper.AddSpecific(agentsv1beta1.GroupVersion.WithKind("Sandbox"), agentsv1beta1.GroupVersion.WithResource("sandboxes"),
		agentsv1beta1.GroupVersion.WithResource("sandbox"), meta.RESTScopeNamespace)
	opts := cache.Options{
		Scheme: scheme,
		Mapper: mapper,
		ByObject: map[client.Object]cache.ByObject{
			// Lookups hand out the cached object itself: routing only reads it, and a deep copy
			// per request was most of a lookup's cost (BenchmarkCacheLookup).
			&agentsv1beta1.Sandbox{}: {Transform: trimSandbox, UnsafeDisableDeepCopy: ptr.To(true)},
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

// Sandbox returns the cached Sandbox, or nil when the cache holds none by that name. Its maps and
// slices are the cache's own: callers must not modify them.
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
// are larger still) so a router watching thousands of Sandboxes stays small. Of the spec only the
// containers' ports and the operating mode stay: they bound the ports the router dials and say
// whether to wake it; of the annotations only the three that waking and activity reports read.
func trimSandbox(obj any) (any, error) {
	sb, ok := obj.(*agentsv1beta1.Sandbox)
	if !ok {
		return obj, nil
	}
	sb.ManagedFields = nil
	var kept map[string]string
	for _, k := range []string{agentsv1beta1.SuspendReasonAnnotation, agentsv1beta1.LastActivityAnnotation, agentsv1beta1.WokenAtAnnotation} {
		if v, ok := sb.Annotations[k]; ok {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[k] = v
		}
	}
	sb.Annotations = kept
	spec := sb.Spec.PodTemplate.Spec
	mode := sb.Spec.OperatingMode
	sb.Spec = agentsv1beta1.SandboxSpec{OperatingMode: mode}
	sb.Spec.PodTemplate.Spec.Containers = portsOnly(spec.Containers)
	sb.Spec.PodTemplate.Spec.InitContainers = portsOnly(spec.InitContainers)
	return sb, nil
}

func portsOnly(containers []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range containers {
		if len(c.Ports) > 0 {
			out = append(out, corev1.Container{Name: c.Name, Ports: c.Ports, RestartPolicy: c.RestartPolicy})
		}
	}
	return out
}
