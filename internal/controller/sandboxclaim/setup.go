package sandboxclaim

import (
	"context"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/warmqueue"
)

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// SetupWithManager registers the controller. The cache indexes of package indexes must be
// registered on mgr first.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		// Only this controller writes a claim's status: its own writes start no pass, so that no
		// pass runs on a cache that does not show them yet (docs/design/cache-lag.md).
		For(&extensionsv1beta1.SandboxClaim{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: kube.BeyondStatus,
			DeleteFunc: func(e event.DeleteEvent) bool { r.memory.forget(e.Object.GetUID()); return true },
		})).
		Owns(&agentsv1beta1.Sandbox{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: boundSandboxChanged})).
		// A legacy per-claim policy that appears is deleted (deleteLegacyPolicy); the informer
		// is the template controller's.
		Owns(&networkingv1.NetworkPolicy{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(event.UpdateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Watches(&agentsv1beta1.Sandbox{}, r.warmQueueEvents()).
		Watches(&extensionsv1beta1.SandboxWarmPool{}, r.poolEvents()).
		Watches(&extensionsv1beta1.SandboxTemplate{}, handler.Funcs{
			// A template that appears may unblock claims waiting with TemplateNotFound.
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { r.enqueueClaimsOfTemplate(ctx, e.Object, q) },
		}).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.Workers}).
		Named("sandboxclaim").
		Complete(r)
}

// boundSandboxChanged passes the Sandbox updates a claim's status depends on.
func boundSandboxChanged(e event.UpdateEvent) bool {
	o, okO := e.ObjectOld.(*agentsv1beta1.Sandbox)
	n, okN := e.ObjectNew.(*agentsv1beta1.Sandbox)
	if !okO || !okN {
		return true
	}
	return o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
		!slices.Equal(o.Status.PodIPs, n.Status.PodIPs) ||
		conditionMoved(o, n, agentsv1beta1.SandboxConditionReady) ||
		conditionMoved(o, n, agentsv1beta1.SandboxConditionFinished) ||
		resizeObserved(o, n) ||
		!equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences)
}

// conditionMoved reports whether a condition appeared, went, or changed what a claim mirrors:
// status, reason or message. A new observedGeneration alone, which every adoption brings, is not
// the claim's business.
func conditionMoved(o, n *agentsv1beta1.Sandbox, condType string) bool {
	a, b := meta.FindStatusCondition(o.Status.Conditions, condType), meta.FindStatusCondition(n.Status.Conditions, condType)
	if a == nil || b == nil {
		return a != b
	}
	return a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message
}

// resizeObserved reports whether the Resized condition moved or now speaks of another generation:
// after an adoption a claim waits for the condition of the adopted generation, which may read
// exactly like the member's before it (resize.go).
func resizeObserved(o, n *agentsv1beta1.Sandbox) bool {
	a, b := meta.FindStatusCondition(o.Status.Conditions, agentsv1beta1.SandboxConditionResized), meta.FindStatusCondition(n.Status.Conditions, agentsv1beta1.SandboxConditionResized)
	return conditionMoved(o, n, agentsv1beta1.SandboxConditionResized) || (a != nil && b != nil && a.ObservedGeneration != b.ObservedGeneration)
}

// warmQueueEvents keeps the in-memory queue of adoptable members in step with the cache. It
// enqueues no claims.
func (r *Reconciler) warmQueueEvents() handler.EventHandler {
	sync := func(old, sb client.Object) {
		if o, ok := old.(*agentsv1beta1.Sandbox); ok {
			if pool, ok := AdoptablePool(o); ok {
				r.queue.Remove(warmqueue.Key{Namespace: o.Namespace, Pool: pool}, o.Name)
			}
		}
		if n, ok := sb.(*agentsv1beta1.Sandbox); ok {
			if pool, ok := AdoptablePool(n); ok {
				r.queue.Add(warmqueue.Key{Namespace: n.Namespace, Pool: pool}, warmqueue.Member{Name: n.Name, NodeName: n.Status.NodeName})
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ queue) { sync(nil, e.Object) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ queue) {
			if n, ok := e.ObjectNew.(*agentsv1beta1.Sandbox); ok {
				if _, adoptable := AdoptablePool(n); adoptable {
					sync(nil, n) // re-adding keeps the queue position and refreshes the node
					return
				}
			}
			sync(e.ObjectOld, nil)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ queue) { sync(e.Object, nil) },
	}
}

// poolEvents wakes unbound claims of a pool that appeared or changed, and drops the queue of a
// pool that is gone.
func (r *Reconciler) poolEvents() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { r.enqueueClaimsOfPool(ctx, e.Object, true, q) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
				r.enqueueClaimsOfPool(ctx, e.ObjectNew, true, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) {
			r.queue.DropPool(warmqueue.Key{Namespace: e.Object.GetNamespace(), Pool: e.Object.GetName()})
			r.enqueueClaimsOfPool(ctx, e.Object, true, q)
		},
	}
}

func (r *Reconciler) enqueueClaimsOfPool(ctx context.Context, pool client.Object, unboundOnly bool, q queue) {
	var claims extensionsv1beta1.SandboxClaimList
	if err := r.client.List(ctx, &claims, client.InNamespace(pool.GetNamespace()),
		client.MatchingFields{extensionsv1beta1.WarmPoolRefField: pool.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing claims of warm pool", "pool", pool.GetName())
		return
	}
	for _, c := range claims.Items {
		if c.DeletionTimestamp.IsZero() && (!unboundOnly || c.Status.Sandbox.Name == "") {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
		}
	}
}

func (r *Reconciler) enqueueClaimsOfTemplate(ctx context.Context, tpl client.Object, q queue) {
	var pools extensionsv1beta1.SandboxWarmPoolList
	if err := r.client.List(ctx, &pools, client.InNamespace(tpl.GetNamespace()),
		client.MatchingFields{extensionsv1beta1.TemplateRefField: tpl.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing warm pools of template", "template", tpl.GetName())
		return
	}
	for i := range pools.Items {
		r.enqueueClaimsOfPool(ctx, &pools.Items[i], false, q)
	}
}
