package sandboxclaim

// In-place resize of warm Sandboxes (docs/design/warm-resources.md): a member that waited small,
// or whose claim chose other resources, is adopted with the claim's resources in its pod template
// (one patch, adopt.go), and the Sandbox controller resizes its Pod in place. The claim is not
// Ready until the Sandbox's Resized condition, for the adopted generation, is True. A resize the
// node cannot fit (Infeasible), one the API server or the kubelet refused, or one still deferred
// or in progress after ResizeGiveUpAfter, discards the warm Sandbox: the claim starts cold, and
// the scheduler places the cold Pod where its resources fit.

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/podresize"
)

// DefaultResizeGiveUpAfter is how long a claim waits for an in-place resize by default: long
// enough for a node to free room for a Deferred resize, short next to a cold start's worst case.
const DefaultResizeGiveUpAfter = 30 * time.Second

// checkResources refuses a claim whose paddock.dev/cpu or paddock.dev/memory is not a quantity or
// above its pool's bounds; admission (config/admission/warm-resources-policy.yaml) refuses the
// same, this catches claims admitted before the policy or a bound lowered since.
func checkResources(c *extensionsv1beta1.SandboxClaim, pool *extensionsv1beta1.SandboxWarmPool) error {
	asked, err := podresize.Requested(c.Annotations)
	if err == nil && !asked.IsZero() {
		var bounds podresize.Sizes
		if bounds, err = podresize.Bounds(pool.Annotations); err == nil {
			err = podresize.Check(asked, bounds, pool.Name)
		}
	}
	if err != nil {
		return newError(errOutOfBounds, "%v", err)
	}
	return nil
}

// resizedWarm reports whether sb is a warm Sandbox whose Pod is resized in place.
func resizedWarm(sb *agentsv1beta1.Sandbox) bool {
	return sb != nil && sb.Labels[agentsv1beta1.LaunchTypeLabel] == agentsv1beta1.LaunchTypeWarm &&
		sb.Annotations[agentsv1beta1.InPlaceResizeAnnotation] == "true"
}

// awaitResize is the resize step of a pass, after claim settings: it holds the claim back from
// Ready until its warm Sandbox runs with its resources, and gives the Sandbox up for a cold one
// when the node cannot resize it. Once resized, a claim is never held back again.
func (r *Reconciler) awaitResize(ctx context.Context, c *extensionsv1beta1.SandboxClaim,
	sb *agentsv1beta1.Sandbox, bindErr error) (*agentsv1beta1.Sandbox, error) {
	if bindErr != nil || !resizedWarm(sb) {
		return sb, bindErr
	}
	mem := r.memory.of(c.UID)
	if r.resizeFellBack(c) {
		return nil, r.discardWarm(ctx, c, sb, "could not be resized in place")
	}
	if mem.resized || meta.IsStatusConditionTrue(c.Status.Conditions, extensionsv1beta1.ClaimConditionResized) {
		return sb, nil
	}
	cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionResized)
	if cond != nil && cond.ObservedGeneration != sb.Generation {
		cond = nil // from before the adoption: says nothing of this resize
	}
	now := r.opts.Clock.Now()
	if cond != nil && cond.Status == metav1.ConditionTrue {
		mem.resized, mem.resizeWaitingSince = true, time.Time{}
		return sb, nil
	}
	if cond == nil {
		// The Sandbox controller has not acted on this resize yet. The give-up measures the node,
		// so it starts at the controller's first report: a slow Sandbox controller would be as
		// slow to start the cold Sandbox, and giving up on its queue would only cost a warm start.
		return sb, &resizeError{reason: agentsv1beta1.SandboxReasonResizeInProgress,
			msg:      fmt.Sprintf("waiting for the Sandbox controller to resize the Pod of Sandbox %q", sb.Name),
			giveUpIn: r.opts.ResizeGiveUpAfter}
	}
	reason, msg := cond.Reason, cond.Message
	if mem.resizeWaitingSince.IsZero() {
		mem.resizeWaitingSince = now
	}
	waited := now.Sub(mem.resizeWaitingSince)
	final := reason == agentsv1beta1.SandboxReasonResizeInfeasible || reason == agentsv1beta1.SandboxReasonResizeFailed
	if !final && waited < r.opts.ResizeGiveUpAfter {
		return sb, &resizeError{reason: reason, msg: msg, giveUpIn: r.opts.ResizeGiveUpAfter - waited}
	}
	if !final {
		msg = fmt.Sprintf("gave up after %s: %s", r.opts.ResizeGiveUpAfter, msg)
	}
	msg += "; discarding the warm Sandbox and starting a cold one"
	mem.resizeWaitingSince = time.Time{}
	mem.resizeFellBack = &metav1.Condition{Type: extensionsv1beta1.ClaimConditionResized, Status: metav1.ConditionFalse,
		ObservedGeneration: c.Generation, Reason: extensionsv1beta1.ClaimReasonResizeFellBack, Message: msg}
	r.event(c, corev1.EventTypeWarning, extensionsv1beta1.ClaimReasonResizeFellBack, "Adoption", msg)
	return nil, errors.Join(&resizeError{reason: extensionsv1beta1.ClaimReasonResizeFellBack, msg: msg},
		r.discardWarm(ctx, c, sb, "could not be resized in place"))
}

func (r *Reconciler) resizeFellBack(c *extensionsv1beta1.SandboxClaim) bool {
	return r.memory.of(c.UID).resizeFellBack != nil || resizeFallbackRecorded(c)
}

// resizeFallbackRecorded reports whether the claim's status records that it gave up a warm
// Sandbox it could not resize.
func resizeFallbackRecorded(c *extensionsv1beta1.SandboxClaim) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionResized)
	return cond != nil && cond.Reason == extensionsv1beta1.ClaimReasonResizeFellBack
}

// setResized sets the claim's Resized condition: the pass's wait or fallback, else the warm
// Sandbox's Resized condition. A claim that fell back keeps the record; a claim whose Sandbox
// was never resized has no such condition.
func setResized(c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, err error) {
	cond := metav1.Condition{Type: extensionsv1beta1.ClaimConditionResized, ObservedGeneration: c.Generation}
	var re *resizeError
	switch {
	case errors.As(err, &re):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, re.reason, re.msg
	case resizedWarm(sb):
		sbCond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionResized)
		if sbCond == nil || sbCond.ObservedGeneration != sb.Generation {
			return // nothing known of this resize yet
		}
		cond.Status, cond.Reason, cond.Message = sbCond.Status, sbCond.Reason, sbCond.Message
	case resizeFallbackRecorded(c):
		return
	default:
		meta.RemoveStatusCondition(&c.Status.Conditions, cond.Type)
		return
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}
