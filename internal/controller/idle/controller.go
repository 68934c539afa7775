package idle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/activity"
	"github.com/paddock-dev/paddock/internal/naming"
)

// ControllerName names the controller, its event recorder and its field manager.
const ControllerName = "idle-controller"

// Event reasons.
const (
	// EventIdle is emitted when a Sandbox is suspended for being idle.
	EventIdle = agentsv1beta1.SandboxReasonIdle
)

// ActivitySource asks a Sandbox's daemon for its activity (sandboxdclient.Client). It returns nil
// and no error for a Sandbox that runs no daemon to ask; an error means the daemon could not
// tell, and the controller then does not suspend.
type ActivitySource interface {
	Activity(ctx context.Context, sb *agentsv1beta1.Sandbox) (*sandboxd.Activity, error)
}

// Reconciler suspends idle Sandboxes. Build it with New.
type Reconciler struct {
	client     client.Client
	recorder   events.EventRecorder
	clock      clock.PassiveClock
	source     ActivitySource
	extensions bool
	workers    int
}

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithClock replaces the real clock, for tests.
func WithClock(c clock.PassiveClock) Option { return func(r *Reconciler) { r.clock = c } }

// WithActivitySource sets how sandboxd is asked (default: none, router and annotations only).
func WithActivitySource(s ActivitySource) Option { return func(r *Reconciler) { r.source = s } }

// WithExtensions makes claims and templates part of the policy; without it only the Sandbox's
// own annotations count and the cache never watches extension kinds.
func WithExtensions(on bool) Option { return func(r *Reconciler) { r.extensions = on } }

// WithWorkers sets how many Sandboxes are judged concurrently (default 4).
func WithWorkers(n int) Option { return func(r *Reconciler) { r.workers = n } }

// New returns the idle Reconciler.
func New(c client.Client, recorder events.EventRecorder, opts ...Option) *Reconciler {
	r := &Reconciler{client: c, recorder: recorder, clock: clock.RealClock{}, workers: 4}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Reconcile judges one Sandbox: clear a stale idle mark, resolve the policy, and suspend, record
// newer activity, or look again when the timeout could next run out.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sb := &agentsv1beta1.Sandbox{}
	if err := r.client.Get(ctx, req.NamespacedName, sb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if sb.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended {
		return ctrl.Result{}, nil
	}
	if _, marked := sb.Annotations[agentsv1beta1.SuspendReasonAnnotation]; marked {
		// Running again: whoever resumed it, a later suspension must not look idle.
		return ctrl.Result{}, r.annotate(ctx, sb, agentsv1beta1.SuspendReasonAnnotation, nil)
	}
	policy, err := r.Policy(ctx, sb)
	if err != nil || policy.Timeout == 0 {
		return ctrl.Result{}, err
	}
	ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		return ctrl.Result{}, nil // a Sandbox still starting is not idle; Ready brings it back
	}
	recorded, stamped := lastActivity(sb)
	if !stamped || recorded.Before(ready.LastTransitionTime.Time) {
		// Start (or restart, after a wake) the clock; the stamp also tells the router to report.
		return ctrl.Result{RequeueAfter: policy.Timeout}, r.record(ctx, sb, ready.LastTransitionTime.Time)
	}
	now := r.clock.Now()
	if now.Before(recorded.Add(policy.Timeout)) {
		return ctrl.Result{RequeueAfter: recorded.Add(policy.Timeout).Sub(now)}, nil
	}
	daemon, err := r.askDaemon(ctx, sb)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := Decide(policy, now, recorded, daemon)
	switch {
	case d.Suspend:
		return ctrl.Result{}, r.suspend(ctx, sb, policy, recorded)
	case !d.Record.IsZero():
		return ctrl.Result{RequeueAfter: d.After}, r.record(ctx, sb, d.Record)
	}
	return ctrl.Result{RequeueAfter: d.After}, nil
}

func (r *Reconciler) askDaemon(ctx context.Context, sb *agentsv1beta1.Sandbox) (*sandboxd.Activity, error) {
	if r.source == nil {
		return nil, nil
	}
	a, err := r.source.Activity(ctx, sb)
	if err != nil {
		activityErrors.Inc()
		return nil, fmt.Errorf("asking the daemon of Sandbox %s/%s for its activity (not suspending until it answers): %w", sb.Namespace, sb.Name, err)
	}
	return a, nil
}

// Policy resolves the idle policy of sb from its own annotations, its controlling claim's and
// its template's. A missing claim or template counts as one without annotations.
func (r *Reconciler) Policy(ctx context.Context, sb *agentsv1beta1.Sandbox) (activity.Policy, error) {
	layers := []map[string]string{sb.Annotations}
	if r.extensions {
		if ref := metav1.GetControllerOfNoCopy(sb); ref != nil && ref.Kind == "SandboxClaim" {
			claim := &extensionsv1beta1.SandboxClaim{}
			if err := r.client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: ref.Name}, claim); client.IgnoreNotFound(err) != nil {
				return activity.Policy{}, err
			}
			layers = append(layers, claim.Annotations)
		}
		if name := sb.Annotations[agentsv1beta1.SandboxTemplateRefAnnotation]; name != "" {
			tpl := &extensionsv1beta1.SandboxTemplate{}
			if err := r.client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: name}, tpl); client.IgnoreNotFound(err) != nil {
				return activity.Policy{}, err
			}
			layers = append(layers, tpl.Annotations)
		}
	}
	return activity.Resolve(layers...), nil
}

// lastActivity is the recorded paddock.dev/last-activity; false when absent or unreadable.
func lastActivity(sb *agentsv1beta1.Sandbox) (time.Time, bool) {
	return activity.Parse(sb.Annotations[agentsv1beta1.LastActivityAnnotation])
}

func (r *Reconciler) record(ctx context.Context, sb *agentsv1beta1.Sandbox, at time.Time) error {
	v := activity.Format(at)
	return r.annotate(ctx, sb, agentsv1beta1.LastActivityAnnotation, &v)
}

// annotate sets (or, with nil, removes) one annotation with an optimistic-locked merge patch, so a
// concurrent change by anyone else wins and the retried pass judges it.
func (r *Reconciler) annotate(ctx context.Context, sb *agentsv1beta1.Sandbox, key string, value *string) error {
	before := sb.DeepCopy()
	if value == nil {
		delete(sb.Annotations, key)
	} else {
		metav1.SetMetaDataAnnotation(&sb.ObjectMeta, key, *value)
	}
	// A conflict is returned: the pass is retried on the newer Sandbox.
	return client.IgnoreNotFound(r.client.Patch(ctx, sb, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

// suspend does what a manual suspension does, marked Idle, in one optimistic-locked patch: if
// anything changed since this pass read the Sandbox (a request's activity, an edit), the patch
// fails with a conflict and the retried pass judges again.
func (r *Reconciler) suspend(ctx context.Context, sb *agentsv1beta1.Sandbox, p activity.Policy, last time.Time) error {
	before := sb.DeepCopy()
	sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
	reason := agentsv1beta1.SuspendReasonIdle
	if !p.WakeOnRequest {
		reason = agentsv1beta1.SuspendReasonIdleNoWake
	}
	metav1.SetMetaDataAnnotation(&sb.ObjectMeta, agentsv1beta1.SuspendReasonAnnotation, reason)
	if err := r.client.Patch(ctx, sb, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("suspending idle Sandbox %s/%s: %w", sb.Namespace, sb.Name, err)
	}
	suspends.WithLabelValues(agentsv1beta1.SandboxReasonIdle).Inc()
	klog.FromContext(ctx).Info("suspended idle sandbox", "sandbox", klog.KObj(sb), "idleTimeout", p.Timeout, "lastActivity", last)
	if r.recorder != nil {
		r.recorder.Eventf(sb, nil, corev1.EventTypeNormal, EventIdle, "Suspend",
			"No activity since %s (idle timeout %s); suspended, storage and Service kept", activity.Format(last), p.Timeout)
	}
	return nil
}

// SetupWithManager registers the controller. Claims and templates (with the extensions) bring
// back the Sandboxes whose policy they may change.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("idle").
		For(&agentsv1beta1.Sandbox{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.workers})
	if r.extensions {
		b = b.Watches(&extensionsv1beta1.SandboxClaim{}, handler.EnqueueRequestsFromMapFunc(r.sandboxesOfClaim)).
			Watches(&extensionsv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.sandboxesOfTemplate))
	}
	return b.Complete(r)
}

func (r *Reconciler) sandboxesOfClaim(ctx context.Context, o client.Object) []reconcile.Request {
	return r.sandboxesMatching(ctx, o.GetNamespace(), client.MatchingFields{agentsv1beta1.SandboxClaimUIDIndex: string(o.GetUID())})
}

func (r *Reconciler) sandboxesOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	return r.sandboxesMatching(ctx, o.GetNamespace(), client.MatchingLabels{agentsv1beta1.SandboxTemplateRefHashLabel: naming.NameHash(o.GetName())})
}

func (r *Reconciler) sandboxesMatching(ctx context.Context, ns string, sel client.ListOption) []reconcile.Request {
	list := &agentsv1beta1.SandboxList{}
	if err := r.client.List(ctx, list, client.InNamespace(ns), sel); err != nil {
		klog.FromContext(ctx).Error(err, "listing Sandboxes to re-judge their idle policy", "namespace", ns)
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}
