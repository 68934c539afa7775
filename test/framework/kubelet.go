package framework

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PlayKubelet stands in for the kubelet in ns until the test ends: every Pod that exists and is
// not Ready is marked Ready (MarkPodReady) with the given addresses (PodIP when none), as a node
// whose containers start at once would. Tests whose sandboxes are servers on loopback pass
// 127.0.0.1.
func (e *Env) PlayKubelet(t testing.TB, ns string, ips ...string) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		tick := time.NewTicker(pollInterval)
		defer tick.Stop()
		for {
			pods := &corev1.PodList{}
			if err := e.Client.List(ctx, pods, client.InNamespace(ns)); err == nil {
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil && !PodIsReady(&p) {
						_, _ = MarkPodReady(ctx, e.Client, client.ObjectKeyFromObject(&p), ips...)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// PodIsReady reports whether the Pod's Ready condition is True.
func PodIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
