package sandboxwarmpool

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/warmpool"
)

func TestCreateOutcome(t *testing.T) {
	sandboxes := schema.GroupResource{Group: "agents.x-k8s.io", Resource: "sandboxes"}
	tests := []struct {
		name string
		sent int
		err  error
		want string
	}{
		{name: "nothing sent says nothing", want: ""},
		{name: "success", sent: 2, want: extensionsv1beta1.PoolReasonMembersCreated},
		{name: "quota", sent: 1, err: apierrors.NewForbidden(sandboxes, "p-abcde", errors.New("exceeded quota: q, requested: count/sandboxes.agents.x-k8s.io=1")), want: extensionsv1beta1.PoolReasonQuotaExceeded},
		{name: "name", sent: 1, err: apierrors.NewInvalid(schema.GroupKind{Kind: "Sandbox"}, "p", field.ErrorList{field.TooLong(field.NewPath("metadata", "name"), "", 63)}), want: extensionsv1beta1.PoolReasonNameTooLong},
		{name: "other", sent: 1, err: errors.New("connection refused"), want: extensionsv1beta1.PoolReasonCreateFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := createOutcome(tt.sent, tt.err).reason; got != tt.want {
				t.Errorf("reason = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSetConditionsProgressing(t *testing.T) {
	pool := &extensionsv1beta1.SandboxWarmPool{Spec: extensionsv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](2)}}
	progressing := func() *metav1.Condition {
		return meta.FindStatusCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionProgressing)
	}
	stuck := warmpool.Plan{Delete: []warmpool.Deletion{{Name: "a", Reason: warmpool.DeleteStuck}}, Replicas: 1}
	setConditions(pool, true, nil, creation{}, stuck)
	if c := progressing(); c.Status != metav1.ConditionFalse || c.Reason != extensionsv1beta1.PoolReasonMembersNotReady {
		t.Fatalf("after a stuck replacement: %s/%s, want False/%s", c.Status, c.Reason, extensionsv1beta1.PoolReasonMembersNotReady)
	}
	// The replacement is young and not Ready yet: the cause stands.
	setConditions(pool, true, nil, creation{}, warmpool.Plan{Replicas: 2})
	if c := progressing(); c.Reason != extensionsv1beta1.PoolReasonMembersNotReady {
		t.Errorf("while replacements are not Ready: reason %s, want %s", c.Reason, extensionsv1beta1.PoolReasonMembersNotReady)
	}
	setConditions(pool, true, nil, creation{}, warmpool.Plan{Replicas: 2, ReadyReplicas: 1})
	if c := progressing(); c.Status != metav1.ConditionTrue {
		t.Errorf("once a member is Ready: %s/%s, want True", c.Status, c.Reason)
	}
}

// Members whose image cannot host sandboxd put the first one's cause on the pool, ahead of any
// other reason, and the pool recovers once none is left.
func TestSetConditionsIncompatibleMembers(t *testing.T) {
	pool := &extensionsv1beta1.SandboxWarmPool{Spec: extensionsv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](2)}}
	plan := warmpool.Plan{Replicas: 2, Incompatible: 2, Unschedulable: 1, IncompatibleMessage: `pool-a: container "app" cannot host sandboxd: no /bin/bash`}
	setConditions(pool, true, nil, creation{}, plan)
	c := meta.FindStatusCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionProgressing)
	want := metav1.Condition{Type: extensionsv1beta1.PoolConditionProgressing, Status: metav1.ConditionFalse, Reason: extensionsv1beta1.PoolReasonMembersIncompatible,
		Message: `2 members cannot start and are held until the template changes; pool-a: container "app" cannot host sandboxd: no /bin/bash`}
	if diff := cmp.Diff(want, *c, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("Progressing (-want +got):\n%s", diff)
	}
	setConditions(pool, true, nil, creation{}, warmpool.Plan{Replicas: 2, ReadyReplicas: 2})
	if c := meta.FindStatusCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionProgressing); c.Status != metav1.ConditionTrue {
		t.Errorf("with every member Ready: %s/%s, want True", c.Status, c.Reason)
	}
}
