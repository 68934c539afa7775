package sandbox

import (
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheOptions returns the cache settings that keep the controller's memory small at scale:
// managed fields are dropped from every object, and Pods keep only their metadata (without
// finalizers), spec.nodeName and status. The controller only ever patches Pod metadata with a
// patch computed against the same stripped object, so the stripped fields are never sent back.
// Merge the result into the manager's cache.Options.
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Transform: StripPod},
		},
	}
}

// StripPod is the cache transform of Pods: see CacheOptions.
func StripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // tombstones and the like pass through
	}
	pod.ManagedFields = nil
	pod.Finalizers = nil
	pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName}
	return pod, nil
}

var _ toolscache.TransformFunc = StripPod
