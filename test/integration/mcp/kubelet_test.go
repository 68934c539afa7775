package mcp

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/test/framework"
)

// playLoopbackKubelet marks every Pod in ns Running and Ready at 127.0.0.1, where the test's
// sandboxd listens, until the test ends.
func playLoopbackKubelet(t *testing.T, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			pods := &corev1.PodList{}
			if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err == nil {
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil && !framework.PodIsReady(&p) {
						markReady(ctx, client.ObjectKeyFromObject(&p))
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

func markReady(ctx context.Context, key client.ObjectKey) {
	if _, err := framework.MarkPodRunning(ctx, env.Client, key, "127.0.0.1"); err != nil {
		return // retried on the next tick
	}
	_, _ = framework.UpdatePodStatus(ctx, env.Client, key, func(p *corev1.Pod) {
		framework.SetPodCondition(p, corev1.PodReady, corev1.ConditionTrue, "")
	})
}

func getClaim(t *testing.T, ns, name string) (*extensionsv1beta1.SandboxClaim, error) {
	claim := &extensionsv1beta1.SandboxClaim{}
	err := env.Client.Get(framework.Context(t, framework.DefaultTimeout), client.ObjectKey{Namespace: ns, Name: name}, claim)
	return claim, err
}

// claimsGone fails while a claim other than except is in ns, deleting or not.
func claimsGone(ctx context.Context, ns, except string) error {
	list := &extensionsv1beta1.SandboxClaimList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	var left []string
	for _, c := range list.Items {
		if c.Name != except {
			left = append(left, c.Name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("claims still there: %v", left)
	}
	return nil
}
