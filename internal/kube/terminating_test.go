package kube

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
)

// namespaceTerminatingRefusal is the error the API server's NamespaceLifecycle admission answers
// a create in a namespace that is being deleted.
func namespaceTerminatingRefusal(ns string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p",
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace " + ns + " is terminating", Field: "metadata.namespace"})
	return err
}

func TestNamespaceTerminating(t *testing.T) {
	refusal := namespaceTerminatingRefusal("ns")
	quota := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("exceeded quota"))
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "the refusal", err: refusal, want: true},
		{name: "the refusal wrapped", err: fmt.Errorf("creating pod: %w", refusal), want: true},
		{name: "the refusal joined", err: errors.Join(errors.New("x"), refusal), want: true},
		{name: "the remembered refusal", err: fmt.Errorf("not creating: %w", ErrNamespaceTerminating), want: true},
		{name: "another forbidden", err: quota, want: false},
		{name: "another error", err: errors.New("conflict"), want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := NamespaceTerminating(tt.err); got != tt.want {
				t.Errorf("NamespaceTerminating(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestTerminatingNamespacesHoldCreates(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	held := NewTerminatingNamespaces(clk)
	held.Observe("a", errors.New("conflict"))
	held.Observe("a", fmt.Errorf("not creating: %w", ErrNamespaceTerminating)) // our own answer proves nothing new
	if got := held.Held("a"); got != 0 {
		t.Fatalf("Held after other errors = %v, want 0", got)
	}
	held.Observe("a", namespaceTerminatingRefusal("a"))
	if got := held.Held("a"); got != TerminatingRecheck {
		t.Errorf("Held after the refusal = %v, want %v", got, TerminatingRecheck)
	}
	if err := held.Check("a", "pod p"); !errors.Is(err, ErrNamespaceTerminating) || !NamespaceTerminating(err) {
		t.Errorf("Check = %v, want ErrNamespaceTerminating", err)
	}
	if got := held.Held("b"); got != 0 {
		t.Errorf("another namespace is held %v, want 0", got)
	}
	clk.SetTime(clk.Now().Add(TerminatingRecheck))
	if got := held.Held("a"); got != 0 {
		t.Errorf("Held after the recheck time = %v, want 0", got)
	}
	if err := held.Check("a", "pod p"); err != nil {
		t.Errorf("Check after the recheck time = %v, want nil", err)
	}
	held.Observe("b", namespaceTerminatingRefusal("b"))
	if _, ok := held.until["a"]; ok {
		t.Errorf("an expired namespace is still remembered: %v", held.until)
	}
}
