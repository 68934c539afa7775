package sandbox

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// MaxWriteBehindWindow caps the write-behind window: a metadata edit never reaches the Pod later
// than this after the controller first saw it, whatever the flag says.
const MaxWriteBehindWindow = time.Second

// writeBehind holds back the metadata patch of a Sandbox's owned Pod for a short window, so
// that a burst of template edits reaches the Pod in one write. It keeps, per Sandbox, when the
// controller first found the Pod out of date; that clock lives only while a patch is pending.
// Nothing else is ever deferred: creates, adoptions, deletes and status are written at once.
type writeBehind struct {
	window time.Duration
	mu     sync.Mutex
	since  map[types.NamespacedName]time.Time
}

// newWriteBehind returns a writeBehind with the given window, capped at MaxWriteBehindWindow;
// 0 turns it off, so every patch is due at once.
func newWriteBehind(window time.Duration) *writeBehind {
	return &writeBehind{window: min(max(window, 0), MaxWriteBehindWindow), since: map[types.NamespacedName]time.Time{}}
}

// wait returns how long the pending patch of key must still be held back at now; 0 means send
// it now. The first call for a key starts its window.
func (w *writeBehind) wait(key types.NamespacedName, now time.Time) time.Duration {
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

// done drops key's clock: its patch was sent, nothing is pending, or the Sandbox is gone.
func (w *writeBehind) done(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.since, key)
}

// pending returns how many Sandboxes have a patch held back.
func (w *writeBehind) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.since)
}
