package sandbox

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// CacheOptions returns the cache settings that keep the controller's memory small at scale:
// managed fields are dropped from every object, and Pods keep only their metadata (without
// finalizers), spec.nodeName, their containers' names, images (which capture a Pod runs,
// rootfs.go) and resources (for in-place resize) and status. The controller patches Pod metadata with a patch computed against the same stripped
// object, and resources through the resize subresource, so the stripped fields are never sent back.
// Secrets are cached only when they carry the tracking label (the credentials Secrets). Merge
// the result into the manager's cache.Options.
func CacheOptions() cache.Options { return cacheOptions(nil) }

// LabelScopedCacheOptions is CacheOptions with the Pod and Service informers limited to objects
// carrying the sandbox-name-hash label (--cache-label-selectors): on a cluster with many other
// Pods the cache holds only Sandboxes' children. A Pod or Service created outside Paddock for a
// Sandbox to adopt must then carry the label, or the controller does not see it.
func LabelScopedCacheOptions() cache.Options { return cacheOptions(ChildSelector()) }

// cacheOptions builds CacheOptions with the Pod and Service informers limited to children, when
// children is not nil.
func cacheOptions(children labels.Selector) cache.Options {
	o := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Transform: StripPod, Label: children},
			// Only the Secrets this controller makes (credentials), never the cluster's others.
			&corev1.Secret{}: {Label: trackedSelector()},
		},
	}
	if children != nil {
		o.ByObject[&corev1.Service{}] = cache.ByObject{Label: children}
	}
	return o
}

// ChildSelector selects the objects that carry the sandbox-name-hash label.
func ChildSelector() labels.Selector {
	req, err := labels.NewRequirement(agentsv1beta1.SandboxNameHashLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // the key is a valid constant
	}
	return labels.NewSelector().Add(*req)
}

// StripPod is the cache transform of Pods: see CacheOptions.
func StripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // tombstones and the like pass through
	}
	pod.ManagedFields = nil
	pod.Finalizers = nil
	containers := make([]corev1.Container, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		containers[i] = corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources}
	}
	pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName, Containers: containers}
	return pod, nil
}

var _ toolscache.TransformFunc = StripPod

// trackedSelector selects objects that carry the tracking label, whatever its value.
func trackedSelector() labels.Selector {
	req, err := labels.NewRequirement(agentsv1beta1.SandboxNameHashLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid key
	}
	return labels.NewSelector().Add(*req)
}
