package sandboxclaim

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// setStatus computes the claim's status from the bound Sandbox (nil when none) and the error of
// the pass. An error keeps the recorded binding: it may be transient.
func setStatus(claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, err error) {
	setReady(claim, sb, err)
	setFinished(claim, sb)
	setSettingsDelivered(claim, sb, err)
	switch {
	case sb != nil:
		claim.Status.Sandbox = extensionsv1beta1.SandboxClaimSandboxStatus{Name: sb.Name, PodIPs: sb.Status.PodIPs}
	case err == nil:
		claim.Status.Sandbox = extensionsv1beta1.SandboxClaimSandboxStatus{}
	}
}

// setReady mirrors the Sandbox's Ready condition, or says why it cannot.
func setReady(claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, err error) {
	c := metav1.Condition{Type: extensionsv1beta1.ClaimConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: claim.Generation}
	var sbReady *metav1.Condition
	if sb != nil {
		sbReady = meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	}
	switch {
	case err != nil:
		c.Reason, c.Message = reasonFor(err)
	case sb == nil:
		c.Reason, c.Message = extensionsv1beta1.ClaimReasonSandboxMissing, "Sandbox does not exist"
	case sbReady == nil:
		c.Reason, c.Message = extensionsv1beta1.ClaimReasonSandboxNotReady, "Sandbox is not ready"
	case sbReady.Reason == agentsv1beta1.SandboxReasonExpired:
		c.Reason, c.Message = extensionsv1beta1.ClaimReasonSandboxExpired, "Underlying Sandbox resource has expired independently of the Claim."
	default:
		c.Status, c.Reason, c.Message, c.LastTransitionTime = sbReady.Status, sbReady.Reason, sbReady.Message, sbReady.LastTransitionTime
	}
	meta.SetStatusCondition(&claim.Status.Conditions, c)
}

// setFinished mirrors the Sandbox's Finished condition. Without a Sandbox it is kept only on an
// expired claim, whose TTL bookkeeping needs it.
func setFinished(claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) {
	if sb == nil {
		if !expiredReady(claim) {
			meta.RemoveStatusCondition(&claim.Status.Conditions, extensionsv1beta1.ClaimConditionFinished)
		}
		return
	}
	f := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionFinished)
	if f == nil {
		meta.RemoveStatusCondition(&claim.Status.Conditions, extensionsv1beta1.ClaimConditionFinished)
		return
	}
	c := *f
	c.ObservedGeneration = claim.Generation
	meta.SetStatusCondition(&claim.Status.Conditions, c)
}

// setExpired marks the claim expired; message explains what happens to its Sandbox.
func setExpired(claim *extensionsv1beta1.SandboxClaim, message string) {
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{
		Type: extensionsv1beta1.ClaimConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: claim.Generation,
		Reason: extensionsv1beta1.ClaimReasonExpired, Message: message,
	})
}

func expiredReady(claim *extensionsv1beta1.SandboxClaim) bool {
	c := meta.FindStatusCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady)
	return c != nil && c.Reason == extensionsv1beta1.ClaimReasonExpired
}

func isReady(claim *extensionsv1beta1.SandboxClaim) bool {
	return meta.IsStatusConditionTrue(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady)
}
