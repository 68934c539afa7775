package sandbox

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// staleCacheRetry is the fallback delay of a pass skipped for a stale cache; the watch event of
// the controller's own write normally brings the Sandbox back much sooner.
const staleCacheRetry = time.Second

// writtenVersions remembers, per Sandbox, the resourceVersion of the controller's last write to
// it. A pass that reads an older version from the cache would recompute from stale status and
// write the same thing again; it waits for the cache to catch up instead.
type writtenVersions struct{ m sync.Map }

// record notes that a pass which read version read left the Sandbox at version written.
func (w *writtenVersions) record(key types.NamespacedName, read, written string) {
	if written != "" && written != read {
		w.m.Store(key, written)
	}
}

// stale reports whether cached is older than the last version the controller wrote. Versions
// that are not comparable integers are never called stale.
func (w *writtenVersions) stale(key types.NamespacedName, cached string) bool {
	v, ok := w.m.Load(key)
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(cached, v.(string))
	if err != nil || cmp >= 0 {
		w.m.CompareAndDelete(key, v)
		return false
	}
	return true
}

// forget drops what is known about a Sandbox that is gone.
func (w *writtenVersions) forget(key types.NamespacedName) { w.m.Delete(key) }
