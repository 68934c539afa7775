package sandboxwarmpool

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/podresize"
	"github.com/paddock-dev/paddock/internal/warmpool"
)

// memberSuffixLen is the length of the random suffix after "<pool>-" in a member's name.
const memberSuffixLen = 5

// creation is what one pass learned about creating members: the reason and message of the
// MembersCreated condition, or an empty reason when the pass tells nothing new.
type creation struct {
	reason, message string
}

// creationBlocker returns why no member of the pool can be created, before any create is sent:
// a pool name too long for its members' names, or a RuntimeClass the cluster does not have.
func (r *Reconciler) creationBlocker(ctx context.Context, pool *extensionsv1beta1.SandboxWarmPool, tpl *extensionsv1beta1.SandboxTemplate) (creation, error) {
	if err := r.terminating.Check(pool.Namespace, "members"); err != nil {
		return namespaceTerminating(), nil
	}
	// A member's name is also its Pod's hostname and its Service's name: a DNS-1035 label.
	if n := len(pool.Name) + 1 + memberSuffixLen; n > validation.DNS1035LabelMaxLength {
		return creation{extensionsv1beta1.PoolReasonNameTooLong, fmt.Sprintf(
			"member names %q plus %d characters are %d long, over the %d a Sandbox's Pod and Service names allow; rename the pool to at most %d characters",
			pool.Name+"-", memberSuffixLen, n, validation.DNS1035LabelMaxLength, validation.DNS1035LabelMaxLength-1-memberSuffixLen)}, nil
	}
	if _, err := podresize.Idle(pool.Annotations); err != nil {
		return creation{extensionsv1beta1.PoolReasonInvalidWarmResources, err.Error() + " (docs/design/warm-resources.md)"}, nil
	}
	if tpl == nil || tpl.Spec.PodTemplate.Spec.RuntimeClassName == nil {
		return creation{}, nil
	}
	name := *tpl.Spec.PodTemplate.Spec.RuntimeClassName
	err := r.client.Get(ctx, types.NamespacedName{Name: name}, &nodev1.RuntimeClass{})
	switch {
	case err == nil:
		return creation{}, nil
	case apierrors.IsNotFound(err):
		return creation{extensionsv1beta1.PoolReasonRuntimeClassNotFound, fmt.Sprintf(
			"SandboxTemplate %q names runtimeClassName %q, which this cluster does not have; create the RuntimeClass or change the template",
			tpl.Name, name)}, nil
	default:
		return creation{}, fmt.Errorf("reading RuntimeClass %q of SandboxTemplate %q: %w", name, tpl.Name, err)
	}
}

// namespaceTerminating is the outcome of creates in a namespace that is being deleted.
func namespaceTerminating() creation {
	return creation{extensionsv1beta1.PoolReasonNamespaceTerminating,
		"The namespace is being deleted and the API server refuses new members; the pool creates none until it is gone"}
}

// createOutcome describes the creates a pass sent: none (empty), all succeeded, or why not.
func createOutcome(sent int, err error) creation {
	switch {
	case sent == 0:
		return creation{}
	case err == nil:
		// The same as a full pool's: a message per refill ("Created 1 members") would cost the
		// pool two status writes per claim, one to say it and one to take it back.
		return creation{extensionsv1beta1.PoolReasonMembersCreated, ""}
	case kube.NamespaceTerminating(err):
		return namespaceTerminating()
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "quota"):
		return creation{extensionsv1beta1.PoolReasonQuotaExceeded, "A ResourceQuota refuses new members; raise the quota or lower spec.replicas: " + err.Error()}
	case apierrors.IsInvalid(err) && strings.Contains(err.Error(), "metadata.name"):
		return creation{extensionsv1beta1.PoolReasonNameTooLong, "The API server refuses the members' names; shorten the pool name: " + err.Error()}
	default:
		return creation{extensionsv1beta1.PoolReasonCreateFailed, err.Error()}
	}
}

// setConditions sets every condition the pool controller owns from this pass's observation.
// made is what creating members gave; an empty reason keeps MembersCreated as it was, unless
// the pool needs no member at all.
func setConditions(pool *extensionsv1beta1.SandboxWarmPool, tplKnown bool, tplErr error, made creation, plan warmpool.Plan) {
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&pool.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: pool.Generation})
	}
	switch {
	case tplKnown:
		set(extensionsv1beta1.PoolConditionTemplateReady, metav1.ConditionTrue, extensionsv1beta1.PoolReasonTemplateFound, "")
	case tplErr != nil:
		set(extensionsv1beta1.PoolConditionTemplateReady, metav1.ConditionUnknown, extensionsv1beta1.PoolReasonTemplateNotFound, tplErr.Error())
	default:
		set(extensionsv1beta1.PoolConditionTemplateReady, metav1.ConditionFalse, extensionsv1beta1.PoolReasonTemplateNotFound,
			fmt.Sprintf("SandboxTemplate %q not found in namespace %q; create it or fix spec.templateRef.name", pool.Spec.TemplateRef.Name, pool.Namespace))
	}

	switch {
	case made.reason == extensionsv1beta1.PoolReasonMembersCreated:
		set(extensionsv1beta1.PoolConditionMembersCreated, metav1.ConditionTrue, made.reason, made.message)
	case made.reason != "":
		set(extensionsv1beta1.PoolConditionMembersCreated, metav1.ConditionFalse, made.reason, made.message)
	case tplKnown && plan.Create == 0 && int(plan.Replicas) >= desiredReplicas(pool),
		meta.FindStatusCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionMembersCreated) == nil:
		set(extensionsv1beta1.PoolConditionMembersCreated, metav1.ConditionTrue, extensionsv1beta1.PoolReasonMembersCreated, "")
	}

	prev := meta.FindStatusCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionProgressing)
	stuck := stuckReplacements(plan)
	switch {
	case plan.Incompatible > 0:
		set(extensionsv1beta1.PoolConditionProgressing, metav1.ConditionFalse, extensionsv1beta1.PoolReasonMembersIncompatible,
			fmt.Sprintf("%d members cannot start and are held until the template changes; %s", plan.Incompatible, plan.IncompatibleMessage))
	case plan.Unschedulable > 0:
		set(extensionsv1beta1.PoolConditionProgressing, metav1.ConditionFalse, extensionsv1beta1.PoolReasonMembersUnschedulable,
			fmt.Sprintf("%d members are unschedulable past the readiness grace period and are held", plan.Unschedulable))
	case stuck > 0:
		set(extensionsv1beta1.PoolConditionProgressing, metav1.ConditionFalse, extensionsv1beta1.PoolReasonMembersNotReady,
			fmt.Sprintf("Replacing %d members that did not become Ready within the readiness grace period; check their Pods", stuck))
	case prev != nil && prev.Reason == extensionsv1beta1.PoolReasonMembersNotReady && plan.ReadyReplicas == 0 && desiredReplicas(pool) > 0:
		// The replacements have not become Ready either: the cause stands.
	default:
		set(extensionsv1beta1.PoolConditionProgressing, metav1.ConditionTrue, extensionsv1beta1.PoolReasonMembersProgressing, "")
	}
}

func stuckReplacements(plan warmpool.Plan) int {
	n := 0
	for _, d := range plan.Delete {
		if d.Reason == warmpool.DeleteStuck {
			n++
		}
	}
	return n
}

// conditionEvents emits a Warning event for each owned condition that turned False (or changed
// its reason while False) in this pass. Unschedulable members have their own event.
func (r *Reconciler) conditionEvents(pool *extensionsv1beta1.SandboxWarmPool, before []metav1.Condition) {
	for _, t := range []string{extensionsv1beta1.PoolConditionTemplateReady, extensionsv1beta1.PoolConditionMembersCreated,
		extensionsv1beta1.PoolConditionProgressing, extensionsv1beta1.PoolConditionAutosizing} {
		now := meta.FindStatusCondition(pool.Status.Conditions, t)
		if now == nil || now.Status != metav1.ConditionFalse || now.Reason == extensionsv1beta1.PoolReasonMembersUnschedulable {
			continue
		}
		if old := meta.FindStatusCondition(before, t); old != nil && old.Status == now.Status && old.Reason == now.Reason {
			continue
		}
		r.recorder.Eventf(pool, nil, corev1.EventTypeWarning, now.Reason, actionReconciling, "%s", now.Message)
	}
}
