package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
		restoring    = condition(agentsv1beta1.SandboxConditionMemoryKept, "False", agentsv1beta1.SandboxReasonMemoryRestoring, 1)
		restoreFail  = condition(agentsv1beta1.SandboxConditionMemoryKept, "False", agentsv1beta1.SandboxReasonMemoryRestoreFailed, 1)
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
		{name: "still restoring memory", before: conds(notSuspended, pending, restoring), after: conds(notSuspended, pending, scheduled, restoring), want: true},
		{name: "memory restore failed", before: conds(notSuspended, pending, restoring), after: conds(notSuspended, pending, restoreFail), want: false},
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
	m := newWriteMemory(0, time.Second)
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
		if got := m.holdStatus(key, s.holdable, t0.Add(s.at)); got != s.want {
			t.Fatalf("step %d at %v: wait = %v, want %v", i, s.at, got, s.want)
		}
	}
	if got := newWriteMemory(0, 0).holdStatus(key, true, t0); got != 0 {
		t.Errorf("window 0: wait = %v, want 0 (holding disabled)", got)
	}
}

func TestWriteBehind(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		key  types.NamespacedName
		at   time.Duration // after t0
		done bool          // call done instead of wait
		want time.Duration
	}
	tests := []struct {
		name        string
		window      time.Duration
		steps       []step
		wantPending int
	}{
		{
			name:   "off: every patch is due at once and nothing is remembered",
			window: 0,
			steps:  []step{{key: a, want: 0}, {key: a, at: time.Millisecond, want: 0}},
		},
		{
			name:   "negative window is off",
			window: -time.Second,
			steps:  []step{{key: a, want: 0}},
		},
		{
			name:   "the first drift starts the window, later passes wait for what is left",
			window: 500 * time.Millisecond,
			steps: []step{
				{key: a, at: 0, want: 500 * time.Millisecond},
				{key: a, at: 200 * time.Millisecond, want: 300 * time.Millisecond},
				{key: a, at: 500 * time.Millisecond, want: 0},
				{key: a, at: 900 * time.Millisecond, want: 0},
			},
			wantPending: 1,
		},
		{
			name:   "a window longer than the cap is capped",
			window: time.Hour,
			steps: []step{
				{key: a, at: 0, want: MaxWriteBehindWindow},
				{key: a, at: MaxWriteBehindWindow, want: 0},
			},
			wantPending: 1,
		},
		{
			name:   "done restarts the clock for the next drift",
			window: 300 * time.Millisecond,
			steps: []step{
				{key: a, at: 0, want: 300 * time.Millisecond},
				{key: a, at: 300 * time.Millisecond, want: 0},
				{key: a, at: 300 * time.Millisecond, done: true},
				{key: a, at: 400 * time.Millisecond, want: 300 * time.Millisecond},
			},
			wantPending: 1,
		},
		{
			name:   "keys have separate clocks",
			window: time.Second,
			steps: []step{
				{key: a, at: 0, want: time.Second},
				{key: b, at: 600 * time.Millisecond, want: time.Second},
				{key: a, at: time.Second, want: 0},
				{key: b, at: time.Second, want: 600 * time.Millisecond},
				{key: a, at: time.Second, done: true},
			},
			wantPending: 1,
		},
		{
			name:   "done on a key without a clock is harmless",
			window: time.Second,
			steps:  []step{{key: a, done: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWriteMemory(tt.window, 0)
			for i, s := range tt.steps {
				if s.done {
					w.releasePodPatch(s.key)
					continue
				}
				if got := w.holdPodPatch(s.key, t0.Add(s.at)); got != s.want {
					t.Errorf("step %d: wait(%s, t0+%s) = %s, want %s", i, s.key, s.at, got, s.want)
				}
			}
			if diff := cmp.Diff(tt.wantPending, w.remembered()); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWrittenVersions(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "sb"}
	w := newWriteMemory(0, 0)
	if w.stale(key, "5") {
		t.Fatalf("stale without any write")
	}
	w.recordWrite(key, "5", "5")
	if w.stale(key, "4") {
		t.Fatalf("a pass that wrote nothing made the cache stale")
	}
	w.recordWrite(key, "5", "9")
	for _, tt := range []struct {
		cached string
		want   bool
	}{
		{"8", true},   // older than our write
		{"10", false}, // caught up (and the record is dropped)
		{"8", false},  // nothing remembered any more
	} {
		if got := w.stale(key, tt.cached); got != tt.want {
			t.Errorf("stale(%s) = %v, want %v", tt.cached, got, tt.want)
		}
	}
	w.recordWrite(key, "10", "12")
	if w.stale(key, "not-a-number") {
		t.Errorf("an incomparable version must never be called stale")
	}
	w.recordWrite(key, "12", "14")
	w.forget(key)
	if w.stale(key, "13") {
		t.Errorf("stale after forget")
	}
}

// One forget drops all three memories of a Sandbox, and only its own; a Sandbox with nothing
// pending is not kept at all.
func TestWriteMemoryForget(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := newWriteMemory(time.Second, time.Second)
	for _, k := range []types.NamespacedName{a, b} {
		m.recordWrite(k, "5", "9")
		m.holdPodPatch(k, t0)
		m.holdStatus(k, true, t0)
	}
	m.forget(a)
	if m.stale(a, "8") {
		t.Errorf("a's last write is remembered after forget")
	}
	if got := m.holdPodPatch(a, t0.Add(time.Second)); got != time.Second {
		t.Errorf("a's Pod patch window survived forget: wait %v, want a new window of 1s", got)
	}
	if got := m.holdStatus(a, true, t0.Add(time.Second)); got != time.Second {
		t.Errorf("a's status window survived forget: wait %v, want a new window of 1s", got)
	}
	if !m.stale(b, "8") || m.holdPodPatch(b, t0.Add(time.Second)) != 0 || m.holdStatus(b, true, t0.Add(time.Second)) != 0 {
		t.Errorf("forgetting a touched b's memory")
	}

	m.forget(a)
	m.releasePodPatch(b)
	m.stale(b, "9") // the cache caught up; the status hold ended with its window
	if diff := cmp.Diff(0, m.remembered()); diff != "" {
		t.Errorf("Sandboxes remembered with nothing pending (-want +got):\n%s", diff)
	}
}
