// Package kube holds the small pieces every Paddock controller shares when it talks to the API
// server: the one way status is written, and owner-reference checks.
package kube

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PatchStatus is the single status-write path of every Paddock controller. It sends a JSON merge
// patch of the status subresource computed from original to obj, and sends nothing when the two
// statuses are semantically equal. status extracts the status field of the concrete type.
//
// Conflict policy: each controller is the only writer of the status of the objects it reconciles,
// so the patch carries no resourceVersion precondition; a concurrent spec change cannot be lost
// because a status patch does not touch spec. A NotFound (the object was deleted meanwhile) is not
// an error. It reports whether a write was sent.
func PatchStatus[T client.Object](ctx context.Context, c client.Client, obj, original T, status func(T) any) (bool, error) {
	if equality.Semantic.DeepEqual(status(obj), status(original)) {
		return false, nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(original)); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("writing status of %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return true, nil
}
