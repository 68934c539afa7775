package sandboxclaim

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
)

// The claim's status, in one place: setStatus computes every condition the controller owns, and
// the bound Sandbox's name and IPs, from what a pass observed; setExpired is expiry's mark.

// setStatus computes the claim's status from the bound Sandbox (nil when none) and the error of
// the pass. An error keeps the recorded binding: it may be transient.
func setStatus(claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, err error) {
	setReady(claim, sb, err)
	setFinished(claim, sb)
	setSettingsDelivered(claim, sb, err)
	setResized(claim, sb, err)
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

// reasonFor maps an error of a pass to the claim's Ready reason and message.
func reasonFor(err error) (reason, message string) {
	var settings *settingsError
	var resize *resizeError
	switch {
	case errors.As(err, &settings):
		return settings.reason, settings.msg
	case errors.As(err, &resize):
		return resize.reason, resize.msg
	case errors.Is(err, errOutOfBounds):
		return extensionsv1beta1.ClaimReasonResourcesOutOfBounds, err.Error()
	case errors.Is(err, errWarmPoolNotFound):
		return extensionsv1beta1.ClaimReasonWarmPoolNotFound, err.Error()
	case errors.Is(err, errTemplateNotFound):
		return extensionsv1beta1.ClaimReasonTemplateNotFound, err.Error()
	case errors.Is(err, errCreatePending):
		return extensionsv1beta1.ClaimReasonSandboxCreatePending, err.Error()
	case errors.Is(err, blueprint.ErrInvalidMetadata):
		return extensionsv1beta1.ClaimReasonInvalidMetadata, err.Error()
	case errors.Is(err, blueprint.ErrEnvInjectionRejected):
		return extensionsv1beta1.ClaimReasonEnvVarsInjectionRejected, err.Error()
	case errors.Is(err, blueprint.ErrVolumeClaimTemplates):
		return extensionsv1beta1.ClaimReasonVolumeClaimTemplatesError, err.Error()
	default:
		return extensionsv1beta1.ClaimReasonReconcilerError, fmt.Sprintf("Error seen: %v", err)
	}
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

// setSettingsDelivered sets the SettingsDelivered condition from the pass's outcome. It is left
// as it was when the pass learnt nothing new: a cold Sandbox keeps the record of why the claim
// went cold. A claim that neither needed settings nor fell back has no such condition.
func setSettingsDelivered(c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, err error) {
	cond := metav1.Condition{Type: extensionsv1beta1.ClaimConditionSettingsDelivered, ObservedGeneration: c.Generation}
	var se *settingsError
	switch {
	case errors.As(err, &se):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, se.reason, se.msg
	case err == nil && needsSettings(c, sb):
		cond.Status, cond.Reason = metav1.ConditionTrue, extensionsv1beta1.ClaimReasonSettingsDelivered
		cond.Message = fmt.Sprintf("sandboxd in warm Sandbox %q is bound to the claim and has its env", sb.Name)
	case len(c.Spec.Env) == 0 && !fallbackRecorded(c):
		meta.RemoveStatusCondition(&c.Status.Conditions, cond.Type)
		return
	default:
		return
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}

// fallbackRecorded reports whether the claim's status records that it gave up a warm Sandbox.
func fallbackRecorded(c *extensionsv1beta1.SandboxClaim) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered)
	return cond != nil && (cond.Reason == extensionsv1beta1.ClaimReasonSettingsFailed || cond.Reason == extensionsv1beta1.ClaimReasonWarmMemberTampered)
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
