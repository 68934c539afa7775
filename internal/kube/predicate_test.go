package kube

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func TestBeyondStatus(t *testing.T) {
	base := func() *extensionsv1beta1.SandboxClaim {
		return &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1, ResourceVersion: "1",
			Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"}}}
	}
	now := metav1.Now()
	for _, tt := range []struct {
		name   string
		mutate func(*extensionsv1beta1.SandboxClaim)
		want   bool
	}{
		{name: "status only", mutate: func(c *extensionsv1beta1.SandboxClaim) { c.Status.Sandbox.Name = "sb"; c.ResourceVersion = "2" }},
		{name: "spec", mutate: func(c *extensionsv1beta1.SandboxClaim) { c.Generation = 2 }, want: true},
		{name: "label", mutate: func(c *extensionsv1beta1.SandboxClaim) { c.Labels["a"] = "2" }, want: true},
		{name: "annotation", mutate: func(c *extensionsv1beta1.SandboxClaim) { c.Annotations["b"] = "3" }, want: true},
		{name: "owner", mutate: func(c *extensionsv1beta1.SandboxClaim) { c.OwnerReferences = []metav1.OwnerReference{{Name: "o"}} }, want: true},
		{name: "finalizer", mutate: func(c *extensionsv1beta1.SandboxClaim) { c.Finalizers = []string{"f"} }, want: true},
		{name: "deletion", mutate: func(c *extensionsv1beta1.SandboxClaim) { c.DeletionTimestamp = &now }, want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := base()
			tt.mutate(n)
			if got := BeyondStatus(event.UpdateEvent{ObjectOld: base(), ObjectNew: n}); got != tt.want {
				t.Errorf("BeyondStatus = %v, want %v", got, tt.want)
			}
		})
	}
}
