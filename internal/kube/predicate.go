package kube

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// BeyondStatus passes updates that change more than an object's status: its generation (spec),
// labels, annotations, owner references, finalizers or deletion. It is the update predicate of a
// controller on the kind whose status only it writes: the controller has already acted on what it
// wrote, and reacting to its own writes would cost a pass per write, on a cache that may not show
// the write yet (docs/design/cache-lag.md).
func BeyondStatus(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	return o.GetGeneration() != n.GetGeneration() ||
		!maps.Equal(o.GetLabels(), n.GetLabels()) ||
		!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
		!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
		!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
		!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
}
