package sandboxclaim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/kube"
)

// Event reasons and actions of the claim controller.
const (
	ReasonClaimExpired       = "ClaimExpired"
	ReasonSandboxProvisioned = "SandboxProvisioned"
	ReasonSandboxAdopted     = "SandboxAdopted"
)

// expiresAt is the earlier of the claim's shutdownTime and ttlSecondsAfterFinished after its
// Finished condition turned True. ok is false when the claim never expires (yet).
func expiresAt(claim *extensionsv1beta1.SandboxClaim) (at time.Time, ok bool) {
	lc := claim.Spec.Lifecycle
	if lc == nil {
		return time.Time{}, false
	}
	if lc.ShutdownTime != nil {
		at, ok = lc.ShutdownTime.Time, true
	}
	f := meta.FindStatusCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionFinished)
	if lc.TTLSecondsAfterFinished != nil && f != nil && f.Status == metav1.ConditionTrue {
		ttlAt := f.LastTransitionTime.Add(time.Duration(*lc.TTLSecondsAfterFinished) * time.Second)
		if !ok || ttlAt.Before(at) {
			at, ok = ttlAt, true
		}
	}
	return at, ok
}

// expire enforces an expired claim's shutdown policy. The first pass only records the expiry in
// status, so nothing is destroyed before the user can see why.
func (r *Reconciler) expire(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) (ctrl.Result, error) {
	if !expiredReady(claim) {
		original := claim.DeepCopy()
		setExpired(claim, "Claim expired. Sandbox cleanup initiated.")
		if _, err := kube.PatchStatus(ctx, r.client, claim, original, claimStatus); err != nil {
			return ctrl.Result{}, err
		}
		r.event(claim, corev1.EventTypeNormal, ReasonClaimExpired, "Claim Expired", "Claim expired")
		return ctrl.Result{RequeueAfter: expiryMarkedRequeue}, nil
	}
	policy := extensionsv1beta1.ShutdownPolicyRetain
	if claim.Spec.Lifecycle.ShutdownPolicy != "" {
		policy = claim.Spec.Lifecycle.ShutdownPolicy
	}
	if policy == extensionsv1beta1.ShutdownPolicyDelete || policy == extensionsv1beta1.ShutdownPolicyDeleteForeground {
		propagation := metav1.DeletePropagationBackground
		if policy == extensionsv1beta1.ShutdownPolicyDeleteForeground {
			propagation = metav1.DeletePropagationForeground
		}
		r.event(claim, corev1.EventTypeNormal, ReasonClaimExpired, "Deleting", fmt.Sprintf("Deleting Claim (ShutdownPolicy=%s)", policy))
		err := r.client.Delete(ctx, claim, client.PropagationPolicy(propagation), client.Preconditions{UID: &claim.UID})
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, r.retireSandbox(ctx, claim)
}

// retireSandbox deletes the Sandbox of an expired Retain claim and records that it is gone.
func (r *Reconciler) retireSandbox(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) error {
	name := claim.Status.Sandbox.Name
	if name == "" {
		name = claim.Name
	}
	original := claim.DeepCopy()
	sb, err := r.getSandbox(ctx, claim.Namespace, name)
	switch {
	case err != nil:
		return err
	case sb == nil:
		claim.Status.Sandbox = extensionsv1beta1.SandboxClaimSandboxStatus{}
	case !blueprint.ControlledBy(sb, claim):
		setExpired(claim, fmt.Sprintf("Claim expired. sandbox %q is controlled by %s, not by this claim; deletion skipped.", sb.Name, kube.DescribeController(sb)))
		claim.Status.Sandbox = extensionsv1beta1.SandboxClaimSandboxStatus{}
	case sb.DeletionTimestamp.IsZero():
		if err := r.client.Delete(ctx, sb, client.Preconditions{UID: &sb.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Sandbox %q of expired claim %q: %w", sb.Name, claim.Name, err)
		}
		ctrl.LoggerFrom(ctx).V(2).Info("Deleted Sandbox of expired claim", "claim", klog.KObj(claim), "sandbox", sb.Name)
	}
	_, err = kube.PatchStatus(ctx, r.client, claim, original, claimStatus)
	return err
}
