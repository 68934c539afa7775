package sandbox

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

func conds(cs ...metav1.Condition) *agentsv1beta1.SandboxStatus {
	return &agentsv1beta1.SandboxStatus{Conditions: cs}
}

func condition(t, s, reason string, gen int64) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(s), Reason: reason, ObservedGeneration: gen}
}

func TestStartingUp(t *testing.T) {
	var (
		notSuspended = condition(agentsv1beta1.SandboxConditionSuspended, "False", agentsv1beta1.SandboxReasonNotSuspended, 1)
		pending      = condition(agentsv1beta1.SandboxConditionReady, "False", agentsv1beta1.SandboxReasonDependenciesNotReady, 1)
		pendingGen2  = condition(agentsv1beta1.SandboxConditionReady, "False", agentsv1beta1.SandboxReasonDependenciesNotReady, 2)
		ready        = condition(agentsv1beta1.SandboxConditionReady, "True", agentsv1beta1.SandboxReasonDependenciesReady, 1)
		failing      = condition(agentsv1beta1.SandboxConditionReady, "False", agentsv1beta1.SandboxReasonReconcilerError, 1)
		scheduled    = condition(agentsv1beta1.SandboxConditionPodScheduled, "True", "PodScheduled", 1)
		suspending   = condition(agentsv1beta1.SandboxConditionSuspended, "False", agentsv1beta1.SandboxReasonPodTerminating, 1)
		finished     = condition(agentsv1beta1.SandboxConditionFinished, "True", agentsv1beta1.SandboxReasonPodFailed, 1)
	)
	tests := []struct {
		name          string
		before, after *agentsv1beta1.SandboxStatus
		want          bool
	}{
		{name: "first status of a new Sandbox", before: conds(), after: conds(notSuspended, pending), want: true},
		{name: "Pod scheduled, not ready yet", before: conds(notSuspended, pending), after: conds(notSuspended, pending, scheduled), want: true},
		{name: "Ready turns True", before: conds(notSuspended, pending), after: conds(notSuspended, ready, scheduled), want: false},
		{name: "Ready turns False", before: conds(notSuspended, ready), after: conds(notSuspended, pending), want: false},
		{name: "an error", before: conds(notSuspended, pending), after: conds(notSuspended, failing), want: false},
		{name: "an error clears", before: conds(notSuspended, failing), after: conds(notSuspended, pending), want: false},
		{name: "spec changed", before: conds(notSuspended, pending), after: conds(notSuspended, pendingGen2), want: false},
		{name: "suspending", before: conds(notSuspended, pending), after: conds(suspending, pending), want: false},
		{name: "finished", before: conds(notSuspended, pending), after: conds(notSuspended, pending, finished), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := startingUp(tt.before, tt.after); got != tt.want {
				t.Errorf("startingUp = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHoldStatus(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "ns", Name: "sb"}
	clock := newHoldClock(time.Second)
	steps := []struct {
		at       time.Duration
		holdable bool
		want     time.Duration
	}{
		{at: 0, holdable: true, want: time.Second},                                 // first change: held for the window
		{at: 400 * time.Millisecond, holdable: true, want: 600 * time.Millisecond}, // later changes do not extend it
		{at: time.Second, holdable: true, want: 0},                                 // window over: write
		{at: 1100 * time.Millisecond, holdable: true, want: time.Second},           // the next change starts a new window
		{at: 1200 * time.Millisecond, holdable: false, want: 0},                    // an urgent change goes at once...
		{at: 1300 * time.Millisecond, holdable: true, want: time.Second},           // ...and clears the clock
	}
	for i, s := range steps {
		if got := holdStatus(clock, key, s.holdable, t0.Add(s.at)); got != s.want {
			t.Fatalf("step %d at %v: wait = %v, want %v", i, s.at, got, s.want)
		}
	}
	if got := holdStatus(newHoldClock(0), key, true, t0); got != 0 {
		t.Errorf("window 0: wait = %v, want 0 (holding disabled)", got)
	}
}

func TestBeyondStatus(t *testing.T) {
	base := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb", Generation: 1, Labels: map[string]string{"a": "1"}}}
	tests := []struct {
		name string
		edit func(*agentsv1beta1.Sandbox)
		want bool
	}{
		{name: "status only", edit: func(sb *agentsv1beta1.Sandbox) { sb.Status.NodeName = "n"; sb.ResourceVersion = "9" }, want: false},
		{name: "spec", edit: func(sb *agentsv1beta1.Sandbox) { sb.Generation = 2 }, want: true},
		{name: "labels", edit: func(sb *agentsv1beta1.Sandbox) { sb.Labels = map[string]string{"a": "2"} }, want: true},
		{name: "annotations", edit: func(sb *agentsv1beta1.Sandbox) { sb.Annotations = map[string]string{"b": "1"} }, want: true},
		{name: "owner", edit: func(sb *agentsv1beta1.Sandbox) { sb.OwnerReferences = []metav1.OwnerReference{{Name: "c"}} }, want: true},
		{name: "deletion", edit: func(sb *agentsv1beta1.Sandbox) { sb.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := base.DeepCopy()
			tt.edit(n)
			if got := beyondStatus(event.UpdateEvent{ObjectOld: base, ObjectNew: n}); got != tt.want {
				t.Errorf("beyondStatus = %v, want %v", got, tt.want)
			}
		})
	}
}
