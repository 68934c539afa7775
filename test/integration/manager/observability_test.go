package manager

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestClaimObservabilityAnnotations runs the manager without, then with
// --claim-observability-annotations. Without it a Ready claim carries neither annotation once
// the manager has stopped (every pass done); with it both the claim that was Ready before and a
// new one get agents.x-k8s.io/sandbox-name and controller-first-observed-at.
func TestClaimObservabilityAnnotations(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, 2*framework.DefaultTimeout)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(0).Obj())

	off := options(t, ns)
	off.Extensions = true
	lean := start(t, off)
	before := readyClaim(t, ns, "before")
	lean.stop()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(before), before); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{extensionsv1beta1.AssignedSandboxNameAnnotation, extensionsv1beta1.ControllerFirstObservedAtAnnotation} {
		if v, ok := before.Annotations[key]; ok {
			t.Errorf("without --claim-observability-annotations the claim has %s=%q, want none", key, v)
		}
	}

	on := options(t, ns)
	on.Extensions = true
	on.ClaimObservabilityAnnotations = true
	start(t, on)
	after := readyClaim(t, ns, "after")
	for _, claim := range []*extensionsv1beta1.SandboxClaim{before, after} {
		framework.Eventually(t, func(ctx context.Context) error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
				return err
			}
			if got := claim.Annotations[extensionsv1beta1.AssignedSandboxNameAnnotation]; got != claim.Status.Sandbox.Name || got == "" {
				return fmt.Errorf("claim %s: sandbox-name annotation = %q, want the bound Sandbox %q", claim.Name, got, claim.Status.Sandbox.Name)
			}
			at := claim.Annotations[extensionsv1beta1.ControllerFirstObservedAtAnnotation]
			if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
				return fmt.Errorf("claim %s: controller-first-observed-at = %q, want an RFC 3339 time: %v", claim.Name, at, err)
			}
			return nil
		})
	}
}

// readyClaim creates a claim on the empty pool (so a cold Sandbox serves it), plays the kubelet
// for its Pod and waits for the claim to be Ready.
func readyClaim(t *testing.T, ns, name string) *extensionsv1beta1.SandboxClaim {
	t.Helper()
	ctx := framework.Context(t, framework.DefaultTimeout)
	claim := builder.MakeClaim(name, ns, "pool").Obj()
	framework.MustCreate(t, ctx, env.Client, claim)
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		if claim.Status.Sandbox.Name == "" {
			return fmt.Errorf("claim %s is not bound yet", name)
		}
		return nil
	})
	podOf(t, ns, claim.Status.Sandbox.Name)
	if _, err := framework.MarkPodReady(ctx, env.Client, client.ObjectKey{Namespace: ns, Name: claim.Status.Sandbox.Name}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		return builder.HasCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady, metav1.ConditionTrue, "")
	})
	return claim
}
