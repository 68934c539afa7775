package kube

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestOwnershipOf(t *testing.T) {
	tests := []struct {
		name string
		refs []metav1.OwnerReference
		want Ownership
	}{
		{"no references", nil, Unowned},
		{"non-controller reference with our UID", []metav1.OwnerReference{{Kind: "Sandbox", Name: "sb", UID: "us"}}, Unowned},
		{"controller is us", []metav1.OwnerReference{{Kind: "Sandbox", Name: "sb", UID: "us", Controller: ptr.To(true)}}, OwnedByUs},
		{"controller is someone else", []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: "them", Controller: ptr.To(true)}}, OwnedByOther},
		{"same name, other UID", []metav1.OwnerReference{{Kind: "Sandbox", Name: "sb", UID: "old", Controller: ptr.To(true)}}, OwnedByOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{OwnerReferences: tt.refs}
			if got := OwnershipOf(obj, "us"); got != tt.want {
				t.Errorf("OwnershipOf = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDescribeController(t *testing.T) {
	obj := &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: "u1", Controller: ptr.To(true)}}}
	if got, want := DescribeController(obj), "ReplicaSet/rs (UID: u1)"; got != want {
		t.Errorf("DescribeController = %q, want %q", got, want)
	}
	if got, want := DescribeController(&metav1.ObjectMeta{}), "nothing"; got != want {
		t.Errorf("DescribeController of an unowned object = %q, want %q", got, want)
	}
}
