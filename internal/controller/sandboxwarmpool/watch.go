package sandboxwarmpool

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
)

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// memberEvents maps Sandbox events to the pool that controls (or controlled) the Sandbox, and
// lowers that pool's expectations before enqueueing it, so the reconcile it triggers already
// counts the observed create or delete.
func (r *Reconciler) memberEvents() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) {
			if pool, ok := PoolOf(e.Object); ok {
				r.expectations.CreationObserved(pool.String())
				q.Add(reconcile.Request{NamespacedName: pool})
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			// An adoption moves the controller from the pool to a claim: the old owner must
			// notice that it lost a member.
			for _, obj := range []client.Object{e.ObjectOld, e.ObjectNew} {
				if pool, ok := PoolOf(obj); ok {
					q.Add(reconcile.Request{NamespacedName: pool})
				}
			}
			if pool, ok := PoolOf(e.ObjectOld); ok {
				if now, still := PoolOf(e.ObjectNew); !still || now != pool {
					r.expectations.Left(pool.String(), e.ObjectOld.GetUID())
				}
			}
			r.observeDemand(e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			r.demand.Gone(e.Object.GetUID())
			if pool, ok := PoolOf(e.Object); ok {
				r.expectations.DeletionObserved(pool.String(), e.Object.GetUID())
				r.expectations.Left(pool.String(), e.Object.GetUID())
				q.Add(reconcile.Request{NamespacedName: pool})
			}
		},
	}
}

// PoolOf returns the SandboxWarmPool controlling obj.
func PoolOf(obj client.Object) (types.NamespacedName, bool) {
	name, ok := blueprint.PoolOf(obj)
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, ok
}

// poolsOfTemplate enqueues the pools made from a template that changed.
func (r *Reconciler) poolsOfTemplate(ctx context.Context, obj client.Object) []reconcile.Request {
	var pools extensionsv1beta1.SandboxWarmPoolList
	if err := r.client.List(ctx, &pools, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{extensionsv1beta1.TemplateRefField: obj.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pools.Items))
	for _, p := range pools.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return reqs
}
