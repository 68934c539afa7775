package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// readyCondition of both claims and Sandboxes.
const readyCondition = agentsv1beta1.SandboxConditionReady

// conditionsOf returns the status conditions of the kinds the harness watches.
func conditionsOf(obj runtime.Object) ([]metav1.Condition, bool) {
	switch o := obj.(type) {
	case *extensionsv1beta1.SandboxClaim:
		return o.Status.Conditions, true
	case *agentsv1beta1.Sandbox:
		return o.Status.Conditions, true
	}
	return nil, false
}

// tracker pairs each object's create time with the first watch event that shows it Ready.
type tracker struct {
	mu       sync.Mutex
	expected int
	started  map[string]time.Time
	ready    map[string]time.Time
	failed   map[string]error
	done     chan struct{}
	closed   bool
}

func newTracker(expected int) *tracker {
	return &tracker{
		expected: expected,
		started:  map[string]time.Time{},
		ready:    map[string]time.Time{},
		failed:   map[string]error{},
		done:     make(chan struct{}),
	}
}

func (t *tracker) start(name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.started[name] = at
}

func (t *tracker) fail(name string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed[name] = err
	t.checkDone()
}

func (t *tracker) observe(name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.ready[name]; seen {
		return
	}
	t.ready[name] = at
	t.checkDone()
}

func (t *tracker) checkDone() {
	if !t.closed && len(t.ready)+len(t.failed) >= t.expected {
		t.closed = true
		close(t.done)
	}
}

// wait blocks until every object is Ready or failed, or ctx ends.
func (t *tracker) wait(ctx context.Context) {
	select {
	case <-t.done:
	case <-ctx.Done():
	}
}

// watchReady starts one watch on list's kind in ns, from a fresh list's resourceVersion, and
// feeds Ready=True events to tr until ctx ends. The RetryWatcher resumes after disconnects from
// the last resourceVersion it saw, so no event is lost to a dropped connection.
func watchReady(ctx context.Context, c client.WithWatch, list client.ObjectList, ns string, tr *tracker) error {
	return watchEach(ctx, c, list, ns, func(obj client.Object, at time.Time) {
		conds, ok := conditionsOf(obj)
		if ok && meta.IsStatusConditionTrue(conds, readyCondition) {
			tr.observe(obj.GetName(), at)
		}
	})
}

// watchEach starts one watch on list's kind in ns, from a fresh list's resourceVersion, and
// hands every added or modified object to seen with the time its event arrived, until ctx ends.
func watchEach(ctx context.Context, c client.WithWatch, list client.ObjectList, ns string, seen func(client.Object, time.Time)) error {
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing before watching in namespace %s: %w", ns, err)
	}
	rv := list.(metav1.ListInterface).GetResourceVersion()
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), client.InNamespace(ns), &client.ListOptions{Raw: &o})
	}}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
	if err != nil {
		return fmt.Errorf("starting watch in namespace %s: %w", ns, err)
	}
	go func() {
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				at := time.Now()
				if obj, isObj := ev.Object.(client.Object); isObj && (ev.Type == watch.Added || ev.Type == watch.Modified) {
					seen(obj, at)
				}
			}
		}
	}()
	return nil
}
