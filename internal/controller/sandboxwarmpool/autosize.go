package sandboxwarmpool

import (
	"context"
	"fmt"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/autosize"
)

// ReasonAutosized is the reason of the event for each autosize decision.
const (
	ReasonAutosized  = "Autosized"
	actionAutosizing = "Autosizing"
)

// sizing is what the autosize step of a pass found, for the Autosizing condition.
type sizing struct {
	on     bool
	policy autosize.Policy
	// invalid names the annotations that stop autosize; writeErr is a failed scale write.
	invalid, writeErr error
}

// autosize sizes spec.replicas of a pool with paddock.dev/autosize "true" from the demand its
// member watch recorded, and writes a change through the scale subresource (so kubectl, an
// HPA and the status all see it as spec.replicas). It returns when to look again.
func (r *Reconciler) autosize(ctx context.Context, pool *extensionsv1beta1.SandboxWarmPool, now time.Time) (sizing, time.Duration) {
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}.String()
	policy, on, err := autosize.FromAnnotations(pool.Annotations)
	if !on || err != nil {
		r.demand.ForgetDecisions(key)
		forgetAutosizeMetrics(pool.Namespace, pool.Name)
		return sizing{on: on, invalid: err}, 0
	}
	current := int32(desiredReplicas(pool))
	d := r.demand.Decide(key, policy, current, now)
	autosizeReplicas.WithLabelValues(pool.Namespace, pool.Name).Set(float64(d.Replicas))
	var recheck time.Duration
	if !d.RecheckAt.IsZero() {
		recheck = d.RecheckAt.Sub(now)
	}
	s := sizing{on: true, policy: policy}
	if d.Replicas == current || r.scalePending(key, pool.ResourceVersion) {
		return s, recheck
	}
	if s.writeErr = r.writeReplicas(ctx, pool, d.Replicas); s.writeErr != nil {
		return s, recheck
	}
	direction := d.Direction(current)
	autosizeDecisions.WithLabelValues(pool.Namespace, pool.Name, direction).Inc()
	ctrl.LoggerFrom(ctx).V(2).Info("Autosized warm pool", "pool", klog.KObj(pool), "from", current, "to", d.Replicas,
		"claims", d.Claims, "claimsPerSecond", d.Rate, "readyTime", d.ReadyTime, "noData", d.NoData)
	r.recorder.Eventf(pool, nil, corev1.EventTypeNormal, ReasonAutosized, actionAutosizing, "%s", d.Why(policy, current, r.opts.AutosizeStabilizationWindow))
	pool.Spec.Replicas = &d.Replicas
	return s, recheck
}

// writeReplicas patches spec.replicas through the pool's scale subresource. Until the cache
// shows the pool changed, the pool's later passes write nothing: the cached spec.replicas is
// the one this write replaced.
func (r *Reconciler) writeReplicas(ctx context.Context, pool *extensionsv1beta1.SandboxWarmPool, replicas int32) error {
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	if err := r.client.SubResource("scale").Patch(ctx, pool, patch, client.WithSubResourceBody(&autoscalingv1.Scale{})); err != nil {
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("writing spec.replicas %d of warm pool %q through the scale subresource: %w; the controller's ClusterRole needs patch on sandboxwarmpools/scale", replicas, pool.Name, err)
		}
		return fmt.Errorf("writing spec.replicas %d of warm pool %q through the scale subresource: %w", replicas, pool.Name, err)
	}
	r.mu.Lock()
	r.scaledFrom[types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}.String()] = pool.ResourceVersion
	r.mu.Unlock()
	return nil
}

// scalePending reports whether the pool's last scale write is not in the cache yet: the pool is
// still at the version that write started from.
func (r *Reconciler) scalePending(key, resourceVersion string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	from, ok := r.scaledFrom[key]
	if ok && from != resourceVersion {
		delete(r.scaledFrom, key)
		return false
	}
	return ok
}

// setAutosizeCondition sets Autosizing on pools that ask for autosize and removes it from the
// others, which never had it unless autosize was turned off.
func setAutosizeCondition(pool *extensionsv1beta1.SandboxWarmPool, s sizing) {
	set := func(status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&pool.Status.Conditions, metav1.Condition{Type: extensionsv1beta1.PoolConditionAutosizing,
			Status: status, Reason: reason, Message: msg, ObservedGeneration: pool.Generation})
	}
	switch {
	case !s.on:
		meta.RemoveStatusCondition(&pool.Status.Conditions, extensionsv1beta1.PoolConditionAutosizing)
	case s.invalid != nil:
		set(metav1.ConditionFalse, extensionsv1beta1.PoolReasonAutosizeInvalid, s.invalid.Error()+"; spec.replicas is left as it is until the annotation is fixed")
	case s.writeErr != nil:
		set(metav1.ConditionFalse, extensionsv1beta1.PoolReasonScaleWriteFailed, s.writeErr.Error())
	default:
		set(metav1.ConditionTrue, extensionsv1beta1.PoolReasonAutosizeActive, fmt.Sprintf(
			"spec.replicas follows the claims the pool sees, between %d and %d members with %d of headroom", s.policy.Min, s.policy.Max, s.policy.Headroom))
	}
}

// observeDemand records what one Sandbox update tells autosize: a member was taken by a claim
// (it left its pool with a claim's label), a member turned Ready in its pool, a Sandbox taken from
// a pool before it was Ready turned Ready since, or a cold Sandbox of a pool's claim did.
func (r *Reconciler) observeDemand(oldObj, newObj client.Object) {
	old, okOld := oldObj.(*agentsv1beta1.Sandbox)
	sb, okNew := newObj.(*agentsv1beta1.Sandbox)
	if !okOld || !okNew {
		return
	}
	now := r.opts.Clock.Now()
	ready := meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	turnedReady := ready && !meta.IsStatusConditionTrue(old.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	was, wasMember := PoolOf(old)
	is, isMember := PoolOf(sb)
	switch {
	case wasMember && (!isMember || is != was) && sb.Labels[agentsv1beta1.ClaimUIDLabel] != "":
		r.demand.MemberTaken(was.String(), sb.UID, sb.CreationTimestamp.Time, ready, now)
	case isMember && turnedReady:
		r.demand.Ready(is.String(), sb.CreationTimestamp.Time, now)
	case turnedReady && sb.Labels[agentsv1beta1.LaunchTypeLabel] == agentsv1beta1.LaunchTypeCold:
		r.demand.ColdReady(types.UID(sb.Labels[agentsv1beta1.ClaimUIDLabel]), sb.CreationTimestamp.Time, now)
	case turnedReady:
		r.demand.ReadyAfterClaim(sb.UID, now)
	}
}

// claimEvents counts every claim of a pool as demand when it is created, whether a member or a
// cold Sandbox serves it: a pool that ran dry, or waits at zero members, sees the claims it
// missed. A claim of an autosized pool starts that pool's pass, so that the refill starts within
// one reconcile of the demand. Claims that the watch lists at start-up count only when made
// within the rate window.
func (r *Reconciler) claimEvents() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) {
			c, ok := e.Object.(*extensionsv1beta1.SandboxClaim)
			if !ok || c.Spec.WarmPoolRef.Name == "" {
				return
			}
			key := types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.WarmPoolRef.Name}
			pool := &extensionsv1beta1.SandboxWarmPool{}
			if err := r.client.Get(ctx, key, pool); err != nil {
				return // no such pool (yet): nothing to size; its claims say so in their status
			}
			now := r.opts.Clock.Now()
			// A claim made while the controller watches is timed by its event; one listed at
			// start-up by its creation, to the second.
			at := now
			if created := c.CreationTimestamp.Time; now.Sub(created) > 2*time.Second {
				at = created
			}
			r.demand.Claim(key.String(), c.UID, at, now)
			if _, on, _ := autosize.FromAnnotations(pool.Annotations); on {
				q.Add(reconcile.Request{NamespacedName: key})
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ queue) {
			r.demand.Gone(e.Object.GetUID())
		},
	}
}
