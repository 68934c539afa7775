package sandbox

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/kube"
)

// DefaultStatusCoalesceWindow is how long, by default, a status change that only reports a
// Sandbox still starting up may wait for the next one (--sandbox-status-coalesce-window).
const DefaultStatusCoalesceWindow = time.Second

// MaxWriteBehindWindow caps the write-behind window: a metadata edit never reaches the Pod later
// than this after the controller first saw it, whatever the flag says.
const MaxWriteBehindWindow = time.Second

// staleCacheRetry is the fallback delay of a pass skipped for a stale cache; the watch event of
// the controller's own write normally brings the Sandbox back much sooner.
const staleCacheRetry = time.Second

// writeStatus writes sb's status once if it differs from before. A change that only reports
// the Sandbox still starting up is held back for the coalesce window instead: writeStatus then
// returns how long until it is due.
func (r *Reconciler) writeStatus(ctx context.Context, sb *agentsv1beta1.Sandbox, before *agentsv1beta1.SandboxStatus) (time.Duration, error) {
	// A new nodeName alone is not worth a write until Ready turns True: it rides along with the
	// next write, which saves one write per scheduled Pod.
	if onlyNodeNameChanged(&sb.Status, before) && !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
		sb.Status.NodeName = before.NodeName
	}
	key := client.ObjectKeyFromObject(sb)
	if equality.Semantic.DeepEqual(&sb.Status, before) {
		r.writes.releaseStatus(key)
		return 0, nil
	}
	// Real time, not r.clock: the hold ends by a requeue, which the work queue counts in real time.
	if wait := r.writes.holdStatus(key, startingUp(before, &sb.Status), time.Now()); wait > 0 {
		return wait, nil
	}
	original := sb.DeepCopy()
	original.Status = *before
	_, err := kube.PatchStatus(ctx, r.client, sb, original, func(s *agentsv1beta1.Sandbox) any { return s.Status })
	return 0, err
}

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
	// A MemoryKept verdict is read from a Pod that is being replaced: a later pass cannot see it
	// again, so it is never held.
	if !equality.Semantic.DeepEqual(meta.FindStatusCondition(before.Conditions, agentsv1beta1.SandboxConditionMemoryKept),
		meta.FindStatusCondition(after.Conditions, agentsv1beta1.SandboxConditionMemoryKept)) {
		return false
	}
	suspended := meta.FindStatusCondition(after.Conditions, agentsv1beta1.SandboxConditionSuspended)
	return suspended != nil && suspended.Reason == agentsv1beta1.SandboxReasonNotSuspended &&
		meta.FindStatusCondition(after.Conditions, agentsv1beta1.SandboxConditionFinished) == nil
}

func dependenciesNotReady(c *metav1.Condition) bool {
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == agentsv1beta1.SandboxReasonDependenciesNotReady
}

// onlyNodeNameChanged reports whether status differs from before in nodeName and nothing else.
func onlyNodeNameChanged(status, before *agentsv1beta1.SandboxStatus) bool {
	if status.NodeName == before.NodeName {
		return false
	}
	s := status.DeepCopy()
	s.NodeName = before.NodeName
	return equality.Semantic.DeepEqual(s, before)
}

// writeMemory is what the controller remembers of each Sandbox between passes, all of it about
// when to write, the Pod that follows one the kubelet rejected included. A Sandbox is remembered
// only while something is pending, and forgotten (forget) when it is deleted or gone. Passes of
// one Sandbox never overlap; one lock serves all of them.
type writeMemory struct {
	podPatchWindow, statusWindow time.Duration
	mu                           sync.Mutex
	of                           map[types.NamespacedName]sandboxWrites
}

// sandboxWrites is what is remembered of one Sandbox; its zero value is nothing, and is not kept.
type sandboxWrites struct {
	// written is the resourceVersion the controller's last write left the Sandbox at, kept until
	// the cache shows it.
	written string
	// podPatchSince and statusSince are when the held Pod metadata patch and the held start-up
	// status change were first found due: the start of their windows. Zero when nothing is held.
	podPatchSince, statusSince time.Time
	// rejection is the last Pod the kubelet rejected at admission, which holds the creation of
	// the next Pod back (reject.go); kept until a Pod of the Sandbox starts a container.
	rejection podRejection
}

// newWriteMemory returns a memory with the two hold windows: the Pod metadata patch's, capped at
// MaxWriteBehindWindow, and start-up status changes'. 0 or less turns a hold off.
func newWriteMemory(podPatchWindow, statusWindow time.Duration) *writeMemory {
	return &writeMemory{podPatchWindow: max(min(podPatchWindow, MaxWriteBehindWindow), 0),
		statusWindow: max(statusWindow, 0), of: map[types.NamespacedName]sandboxWrites{}}
}

// update applies change to key's entry under the lock and drops the entry if it is left empty.
func (m *writeMemory) update(key types.NamespacedName, change func(*sandboxWrites)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.of[key]
	change(&e)
	if e == (sandboxWrites{}) {
		delete(m.of, key)
		return
	}
	m.of[key] = e
}

// recordWrite notes that a pass which read version read left the Sandbox at version written.
func (m *writeMemory) recordWrite(key types.NamespacedName, read, written string) {
	if written == "" || written == read {
		return
	}
	m.update(key, func(e *sandboxWrites) { e.written = written })
}

// stale reports whether cached is older than the last version the controller wrote. A cache
// that caught up clears the record. Versions that are not comparable integers are never stale.
func (m *writeMemory) stale(key types.NamespacedName, cached string) bool {
	isStale := false
	m.update(key, func(e *sandboxWrites) {
		if e.written == "" {
			return
		}
		cmp, err := resourceversion.CompareResourceVersion(cached, e.written)
		if isStale = err == nil && cmp < 0; !isStale {
			e.written = ""
		}
	})
	return isStale
}

// holdPodPatch returns how long the owned Pod's metadata patch must still wait at now; 0 means
// send it now. The first call starts the window; releasePodPatch ends it.
func (m *writeMemory) holdPodPatch(key types.NamespacedName, now time.Time) time.Duration {
	var wait time.Duration
	m.update(key, func(e *sandboxWrites) { wait = hold(&e.podPatchSince, m.podPatchWindow, now) })
	return wait
}

// releasePodPatch ends the Pod metadata patch's window: it was sent, or nothing is due.
func (m *writeMemory) releasePodPatch(key types.NamespacedName) {
	m.update(key, func(e *sandboxWrites) { e.podPatchSince = time.Time{} })
}

// holdStatus returns how much longer a status change may wait at now: 0 to write it now. Only a
// start-up-only change (holdable) waits, at most the window from the first change held, so that
// it rides along with the write that follows (usually Ready).
func (m *writeMemory) holdStatus(key types.NamespacedName, holdable bool, now time.Time) time.Duration {
	var wait time.Duration
	m.update(key, func(e *sandboxWrites) {
		if holdable {
			wait = hold(&e.statusSince, m.statusWindow, now)
		}
		if wait == 0 {
			e.statusSince = time.Time{}
		}
	})
	return wait
}

// releaseStatus ends the status hold's window: nothing is left to write.
func (m *writeMemory) releaseStatus(key types.NamespacedName) {
	m.update(key, func(e *sandboxWrites) { e.statusSince = time.Time{} })
}

// rememberRejection notes that the kubelet rejected the Pod described by rej at admission, seen
// at now, and returns the rejection as remembered: one more in a row, the next Pod held back by
// podRetryBackoff. The same Pod seen again (a cache that does not show its deletion yet) changes
// nothing, and fresh is false.
func (m *writeMemory) rememberRejection(key types.NamespacedName, rej podRejection, now time.Time) (_ podRejection, fresh bool) {
	m.update(key, func(e *sandboxWrites) {
		if e.rejection.podUID == rej.podUID {
			rej = e.rejection
			return
		}
		fresh = true
		rej.count = e.rejection.count + 1
		rej.retryAt = podRetryAt(rej.count, now)
		e.rejection = rej
	})
	return rej, fresh
}

// heldRejection returns the last rejection and how long the next Pod is still held back by it
// at now; 0 when a Pod may be created.
func (m *writeMemory) heldRejection(key types.NamespacedName, now time.Time) (podRejection, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rej := m.of[key].rejection
	if rej.retryAt.IsZero() || !now.Before(rej.retryAt) {
		return rej, 0
	}
	return rej, rej.retryAt.Sub(now)
}

// forgetRejections ends a run of rejections: a Pod of the Sandbox started a container.
func (m *writeMemory) forgetRejections(key types.NamespacedName) {
	m.update(key, func(e *sandboxWrites) { e.rejection = podRejection{} })
}

// forget drops everything remembered of a Sandbox that is deleted or gone.
func (m *writeMemory) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.of, key)
}

// remembered returns how many Sandboxes have something remembered.
func (m *writeMemory) remembered() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.of)
}

// hold returns how long a write held since *since must still wait at now under window, starting
// the window (setting *since) at the first call; 0 means write now. A zero window holds nothing.
func hold(since *time.Time, window time.Duration, now time.Time) time.Duration {
	if window == 0 {
		return 0
	}
	if since.IsZero() {
		*since = now
		return window
	}
	return max(since.Add(window).Sub(now), 0)
}
