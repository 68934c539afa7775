package extensions

import (
	"context"
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestLegacyPerClaimPolicyRemoved proves that the per-claim NetworkPolicy older controllers
// made goes once the claim controller sees it, and only when the claim controls it.
func TestLegacyPerClaimPolicyRemoved(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	// Without a pool the claims stay unbound: nothing but the policies happens to them.
	create(t, builder.MakeClaim("owned", ns, "missing").Obj())
	create(t, builder.MakeClaim("foreign", ns, "missing").Obj())
	owned := waitClaimReason(t, ns, "owned", "False", extensionsv1beta1.ClaimReasonWarmPoolNotFound)
	waitClaimReason(t, ns, "foreign", "False", extensionsv1beta1.ClaimReasonWarmPoolNotFound)

	// The foreign claim's policy is made first: when the owned one is gone, the controller has
	// had every chance to delete the foreign one too.
	foreign := &networkingv1.NetworkPolicy{ObjectMeta: objectMeta(ns, "foreign-network-policy")}
	create(t, foreign)
	policy := &networkingv1.NetworkPolicy{ObjectMeta: objectMeta(ns, "owned-network-policy")}
	policy.OwnerReferences = append(policy.OwnerReferences, blueprint.ControllerRef("SandboxClaim", owned))
	create(t, policy)

	framework.Eventually(t, func(ctx context.Context) error {
		_, err := get(ctx, ns, policy.Name, &networkingv1.NetworkPolicy{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("legacy policy %s still there (err %v)", policy.Name, err)
	})
	if _, err := get(ctx, ns, foreign.Name, &networkingv1.NetworkPolicy{}); err != nil {
		t.Errorf("a policy the claim does not control was touched: %v", err)
	}
}

// TestLaunchTypeBackfilled proves that a bound Sandbox an older controller left without a
// launch type gets one: cold when it is named after its claim, warm otherwise.
func TestLaunchTypeBackfilled(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	create(t, builder.MakeClaim("cold", ns, "missing").Obj())
	create(t, builder.MakeClaim("warm", ns, "missing").Obj())
	for _, tc := range []struct{ claim, sandbox, want string }{
		{"cold", "cold", agentsv1beta1.LaunchTypeCold},
		{"warm", "pool-x1y2z", agentsv1beta1.LaunchTypeWarm},
	} {
		claim := waitClaimReason(t, ns, tc.claim, "False", extensionsv1beta1.ClaimReasonWarmPoolNotFound)
		create(t, builder.MakeSandbox(tc.sandbox, ns).Label(agentsv1beta1.ClaimUIDLabel, string(claim.UID)).
			ControlledBy(claim, extensionsv1beta1.GroupVersion.WithKind("SandboxClaim")).Obj())
		framework.Eventually(t, func(ctx context.Context) error {
			sb := &agentsv1beta1.Sandbox{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: tc.sandbox}, sb); err != nil {
				return err
			}
			if got := sb.Labels[agentsv1beta1.LaunchTypeLabel]; got != tc.want {
				return fmt.Errorf("Sandbox %s launch-type = %q, want %q", tc.sandbox, got, tc.want)
			}
			return nil
		})
	}
}
