package sandboxclaim

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
)

// Leftovers of older controllers that the claim controller tidies up as it meets them.

// legacyPolicyName is the per-claim NetworkPolicy older controllers made; templates now own one
// shared policy each.
func legacyPolicyName(claim *extensionsv1beta1.SandboxClaim) string {
	return claim.Name + "-network-policy"
}

// deleteLegacyPolicy removes the claim's per-claim NetworkPolicy when the claim controls it.
// The read is from the cache, so claims without one cost nothing. Failures are only logged: the
// policy is a leftover, not part of the binding, and the next pass tries again.
func (r *Reconciler) deleteLegacyPolicy(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) {
	log := ctrl.LoggerFrom(ctx)
	np := &networkingv1.NetworkPolicy{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: legacyPolicyName(claim)}, np); err != nil {
		if !apierrors.IsNotFound(err) {
			log.Error(err, "Reading legacy per-claim NetworkPolicy", "claim", klog.KObj(claim))
		}
		return
	}
	if !blueprint.ControlledBy(np, claim) {
		return
	}
	if err := r.client.Delete(ctx, np, client.Preconditions{UID: &np.UID}); client.IgnoreNotFound(err) != nil {
		log.Error(err, "Deleting legacy per-claim NetworkPolicy", "claim", klog.KObj(claim), "networkPolicy", np.Name)
		return
	}
	log.V(2).Info("Deleted legacy per-claim NetworkPolicy", "claim", klog.KObj(claim), "networkPolicy", np.Name)
}

// backfillLaunchType labels a bound Sandbox that an older controller left without a launch type:
// a Sandbox named after its claim was created for it (cold), any other was adopted (warm). An
// existing value is never changed. It reports whether sb changed.
func backfillLaunchType(sb *agentsv1beta1.Sandbox, claim *extensionsv1beta1.SandboxClaim) bool {
	if _, ok := sb.Labels[agentsv1beta1.LaunchTypeLabel]; ok {
		return false
	}
	launch := agentsv1beta1.LaunchTypeWarm
	if sb.Name == claim.Name {
		launch = agentsv1beta1.LaunchTypeCold
	}
	if sb.Labels == nil {
		sb.Labels = map[string]string{}
	}
	sb.Labels[agentsv1beta1.LaunchTypeLabel] = launch
	return true
}
