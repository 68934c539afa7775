package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/naming"
)

const (
	// expiryTeardownDelay separates the pass that marks a Sandbox expired from the teardown.
	expiryTeardownDelay = time.Millisecond
	// minExpiryRequeue bounds how often a Sandbox waiting for its shutdownTime is revisited.
	minExpiryRequeue = 2 * time.Second
)

// expired reports whether sb's shutdownTime has come.
func expired(sb *agentsv1beta1.Sandbox, now time.Time) bool {
	return sb.Spec.ShutdownTime != nil && !now.Before(sb.Spec.ShutdownTime.Time)
}

// markedExpired reports whether a previous pass already persisted the expiry.
func markedExpired(sb *agentsv1beta1.Sandbox) bool {
	c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	return c != nil && c.Reason == agentsv1beta1.SandboxReasonExpired
}

// markExpired sets Ready False with reason SandboxExpired; the Pod's scheduling no longer matters.
func markExpired(sb *agentsv1beta1.Sandbox) {
	setCondition(sb, agentsv1beta1.SandboxConditionReady, metav1.ConditionFalse, agentsv1beta1.SandboxReasonExpired, msgExpired)
	meta.RemoveStatusCondition(&sb.Status.Conditions, agentsv1beta1.SandboxConditionPodScheduled)
}

// scheduleExpiry returns when to look at sb again for its shutdownTime. A Sandbox that expired
// during the pass is marked at once and revisited for teardown.
func (r *Reconciler) scheduleExpiry(sb *agentsv1beta1.Sandbox) ctrl.Result {
	if sb.Spec.ShutdownTime == nil {
		return ctrl.Result{}
	}
	now := r.opts.Clock.Now()
	if expired(sb, now) {
		markExpired(sb)
		return ctrl.Result{RequeueAfter: expiryTeardownDelay}
	}
	return ctrl.Result{RequeueAfter: max(sb.Spec.ShutdownTime.Sub(now), minExpiryRequeue)}
}

// tearDownExpired deletes the owned Pod and Service of an expired Sandbox; volume claims stay.
// With shutdownPolicy Delete it then deletes the Sandbox and reports deleted. With Retain the
// status keeps only its conditions and says the Sandbox expired.
func (r *Reconciler) tearDownExpired(ctx context.Context, sb *agentsv1beta1.Sandbox) (deleted bool, err error) {
	pods, err := r.expiredPods(ctx, sb)
	errs := []error{err}
	for _, pod := range pods {
		errs = append(errs, r.deleteOwned(ctx, sb, pod))
	}
	svc := &corev1.Service{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: sb.Name}, svc); err == nil {
		errs = append(errs, r.deleteOwned(ctx, sb, svc))
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("reading service %q of expired sandbox: %w", sb.Name, err))
	}
	if err := errors.Join(errs...); err != nil {
		return false, err
	}

	if sb.Spec.ShutdownPolicy != nil && *sb.Spec.ShutdownPolicy == agentsv1beta1.ShutdownPolicyDelete {
		if err := r.client.Delete(ctx, sb); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("deleting expired sandbox %q (shutdownPolicy Delete): %w", sb.Name, err)
		}
		ctrl.LoggerFrom(ctx).V(2).Info("Deleted expired sandbox")
		return true, nil
	}
	sb.Status = agentsv1beta1.SandboxStatus{Conditions: sb.Status.Conditions}
	markExpired(sb)
	return false, nil
}

// expiredPods returns the Pods an expired Sandbox still controls: the tracked one and any owned
// one found through the index.
func (r *Reconciler) expiredPods(ctx context.Context, sb *agentsv1beta1.Sandbox) ([]client.Object, error) {
	var pods []client.Object
	tracked, err := r.findPod(ctx, sb)
	var multiple *multiplePodsError
	switch {
	case errors.As(err, &multiple):
		var list corev1.PodList
		if err := r.client.List(ctx, &list, client.InNamespace(sb.Namespace),
			client.MatchingFields{agentsv1beta1.PodNameHashIndex: naming.NameHash(sb.Name)}); err != nil {
			return nil, fmt.Errorf("listing pods of expired sandbox %q: %w", sb.Name, err)
		}
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
	case err != nil:
		return nil, err
	case tracked != nil:
		pods = append(pods, tracked)
	}
	return pods, nil
}

// deleteOwned deletes obj if sb controls it; anything else is left alone and logged.
func (r *Reconciler) deleteOwned(ctx context.Context, sb *agentsv1beta1.Sandbox, obj client.Object) error {
	if kube.OwnershipOf(obj, sb.UID) != kube.OwnedByUs {
		ctrl.LoggerFrom(ctx).Info("Expired sandbox leaves an object it does not control", "object", klog.KObj(obj), "controller", kube.DescribeController(obj))
		return nil
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if err := r.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s of expired sandbox %q: %w", klog.KObj(obj), sb.Name, err)
	}
	return nil
}
