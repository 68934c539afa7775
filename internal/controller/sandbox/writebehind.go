package sandbox

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// MaxWriteBehindWindow caps the write-behind window: a metadata edit never reaches the Pod later
// than this after the controller first saw it, whatever the flag says.
const MaxWriteBehindWindow = time.Second

// holdClock holds back one kind of write per Sandbox for at most a window, counted from the
// first pass that found the write due; the clock lives only while a write is held. The Sandbox
// controller keeps two: the metadata patch of an owned Pod (--sandbox-write-behind-window), so
// that a burst of template edits reaches the Pod in one write, and start-up-only status changes
// (--sandbox-status-coalesce-window, see startingUp).
type holdClock struct {
	window time.Duration
	mu     sync.Mutex
	since  map[types.NamespacedName]time.Time
}

// newWriteBehind returns the clock of Pod metadata patches, its window capped at
// MaxWriteBehindWindow; 0 turns it off, so every patch is due at once.
func newWriteBehind(window time.Duration) *holdClock {
	return newHoldClock(min(window, MaxWriteBehindWindow))
}

// newHoldClock returns a clock with the given window; 0 or less turns it off.
func newHoldClock(window time.Duration) *holdClock {
	return &holdClock{window: max(window, 0), since: map[types.NamespacedName]time.Time{}}
}

// wait returns how long the held write of key must still wait at now; 0 means send it now.
// The first call for a key starts its window.
func (w *holdClock) wait(key types.NamespacedName, now time.Time) time.Duration {
	if w.window == 0 {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	start, ok := w.since[key]
	if !ok {
		w.since[key] = now
		return w.window
	}
	return max(start.Add(w.window).Sub(now), 0)
}

// done drops key's clock: its write was sent, nothing is held, or the Sandbox is gone.
func (w *holdClock) done(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.since, key)
}

// pending returns how many Sandboxes have a write held back.
func (w *holdClock) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.since)
}
