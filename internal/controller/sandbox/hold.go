package sandbox

import (
	"sync"
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

// statusHold holds back start-up-only status writes for at most a window per Sandbox, counted
// from the first change held, so that they ride along with the write that follows (usually
// Ready) instead of costing one write each.
type statusHold struct {
	window time.Duration
	since  sync.Map // types.NamespacedName → time.Time
}

// wait returns how much longer the write of a change may be held: 0 to write it now.
func (h *statusHold) wait(key types.NamespacedName, holdable bool, now time.Time) time.Duration {
	if !holdable || h.window <= 0 {
		h.since.Delete(key)
		return 0
	}
	v, _ := h.since.LoadOrStore(key, now)
	if left := h.window - now.Sub(v.(time.Time)); left > 0 {
		return left
	}
	h.since.Delete(key)
	return 0
}

// forget drops the clock of a Sandbox with nothing to write or that is gone.
func (h *statusHold) forget(key types.NamespacedName) { h.since.Delete(key) }
