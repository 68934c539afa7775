package sandbox

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// create sends the create of a child (what names it in errors), unless the API server refused a
// create in its namespace lately because the namespace is being deleted: the refusal would only
// repeat, once per Sandbox and pass, while the namespace waits for its Pods to go.
func (r *Reconciler) create(ctx context.Context, obj client.Object, what string) error {
	if err := r.terminating.Check(obj.GetNamespace(), what); err != nil {
		return err
	}
	err := r.client.Create(ctx, obj, fieldOwner)
	r.terminating.Observe(obj.GetNamespace(), err)
	return err
}
