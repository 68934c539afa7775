package sandbox

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// DefaultStatusCoalesceWindow is how long, by default, a status change that only reports a
// Sandbox still starting up may wait for the next one (--sandbox-status-coalesce-window).
const DefaultStatusCoalesceWindow = time.Second

// startingUp reports whether the change from before to after only says that a Sandbox is still
// coming up: Ready stays False because its Pod is not ready yet, for the same generation, and
// nothing is suspended, finished or failing. A new Sandbox goes through two or three such states
// (no status, Pod pending, Pod scheduled) within a second or so before turning Ready; writing
// each would cost the API server a write per state and tell nobody anything they act on.
func startingUp(before, after *agentsv1beta1.SandboxStatus) bool {
	ready := meta.FindStatusCondition(after.Conditions, agentsv1beta1.SandboxConditionReady)
	if !dependenciesNotReady(ready) {
		return false
	}
	if was := meta.FindStatusCondition(before.Conditions, agentsv1beta1.SandboxConditionReady); was != nil &&
		(!dependenciesNotReady(was) || was.ObservedGeneration != ready.ObservedGeneration) {
		return false
	}
	suspended := meta.FindStatusCondition(after.Conditions, agentsv1beta1.SandboxConditionSuspended)
	return suspended != nil && suspended.Reason == agentsv1beta1.SandboxReasonNotSuspended &&
		meta.FindStatusCondition(after.Conditions, agentsv1beta1.SandboxConditionFinished) == nil
}

func dependenciesNotReady(c *metav1.Condition) bool {
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == agentsv1beta1.SandboxReasonDependenciesNotReady
}

// holdStatus returns how much longer a status change may wait on clock: 0 to write it now. Only
// a start-up-only change (holdable) waits, at most the clock's window from the first change
// held, so that it rides along with the write that follows (usually Ready).
func holdStatus(clock *holdClock, key types.NamespacedName, holdable bool, now time.Time) time.Duration {
	if !holdable {
		clock.done(key)
		return 0
	}
	wait := clock.wait(key, now)
	if wait == 0 {
		clock.done(key)
	}
	return wait
}
