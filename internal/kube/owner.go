package kube

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Ownership is how an object relates to a would-be controller.
type Ownership int

const (
	// Unowned objects have no controller owner reference.
	Unowned Ownership = iota
	// OwnedByUs objects name the given UID as their controller.
	OwnedByUs
	// OwnedByOther objects have a controller that is someone else.
	OwnedByOther
)

// OwnershipOf classifies obj by its controller owner reference against uid. Only the UID decides;
// labels are at most hints.
func OwnershipOf(obj metav1.Object, uid types.UID) Ownership {
	ref := metav1.GetControllerOfNoCopy(obj)
	switch {
	case ref == nil:
		return Unowned
	case ref.UID == uid:
		return OwnedByUs
	default:
		return OwnedByOther
	}
}

// DescribeController renders obj's controller as "Kind/Name (UID: uid)" for error messages, or
// "nothing" when it has none.
func DescribeController(obj metav1.Object) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return "nothing"
	}
	return fmt.Sprintf("%s/%s (UID: %s)", ref.Kind, ref.Name, ref.UID)
}
