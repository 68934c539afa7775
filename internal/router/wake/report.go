package wake

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/activity"
	"github.com/paddock-dev/paddock/internal/router/resolve"
)

// Reporter remembers, in memory, the last request forwarded to each Sandbox and writes it to
// paddock.dev/last-activity at most once per activity.RecordInterval. Only Sandboxes that already carry
// the annotation (the idle controller stamps the ones with an idle policy) are written to.
type Reporter struct {
	lookup  resolve.Lookup
	patcher Patcher
	clock   clock.PassiveClock
	log     logr.Logger

	mu   sync.Mutex
	seen map[types.NamespacedName]time.Time
}

// NewReporter returns a Reporter; start its loop with Run.
func NewReporter(lookup resolve.Lookup, patcher Patcher, c clock.PassiveClock, log logr.Logger) *Reporter {
	return &Reporter{lookup: lookup, patcher: patcher, clock: c, log: log, seen: map[types.NamespacedName]time.Time{}}
}

// Seen records a request for a Sandbox now. It costs a map write, never an API call.
func (r *Reporter) Seen(namespace, name string) {
	now := r.clock.Now()
	r.mu.Lock()
	r.seen[types.NamespacedName{Namespace: namespace, Name: name}] = now
	r.mu.Unlock()
}

// Run flushes every activity.RecordInterval until ctx ends.
func (r *Reporter) Run(ctx context.Context) {
	t := time.NewTicker(activity.RecordInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Flush(ctx)
		}
	}
}

// Flush writes the activity of every Sandbox seen since the last flush whose recorded activity
// is at least activity.RecordInterval older, and reports how many writes it sent.
func (r *Reporter) Flush(ctx context.Context) int {
	r.mu.Lock()
	seen := r.seen
	r.seen = map[types.NamespacedName]time.Time{}
	r.mu.Unlock()
	writes := 0
	for key, at := range seen {
		sb, err := r.lookup.Sandbox(ctx, key.Namespace, key.Name)
		if err != nil || sb == nil {
			continue
		}
		v, tracked := sb.Annotations[agentsv1beta1.LastActivityAnnotation]
		if !tracked {
			continue // no idle policy: nobody reads it
		}
		if recorded, ok := activity.Parse(v); ok && at.Sub(recorded) < activity.RecordInterval {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			agentsv1beta1.LastActivityAnnotation: activity.Format(at)}}})
		if err := r.patcher.MergePatch(ctx, key.Namespace, key.Name, patch); err != nil {
			r.log.Error(err, "reporting sandbox activity", "namespace", key.Namespace, "name", key.Name)
			continue
		}
		writes++
	}
	return writes
}
