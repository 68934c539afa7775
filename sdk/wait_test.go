package sdk

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func claimWith(rv, sandbox string, conds ...metav1.Condition) *extensionsv1beta1.SandboxClaim {
	c := &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: rv}}
	c.Status.Sandbox.Name = sandbox
	c.Status.Sandbox.PodIPs = []string{"198.18.0.7"}
	c.Status.Conditions = conds
	return c
}

func ready(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: extensionsv1beta1.ClaimConditionReady, Status: status, Reason: reason, Message: msg}
}

func TestClaimReadyStateMachine(t *testing.T) {
	tests := []struct {
		name       string
		ev         watch.Event
		wantDone   bool
		wantKind   error
		wantReason string
	}{
		{"no condition yet", watch.Event{Type: watch.Added, Object: claimWith("1", "")}, false, nil, ""},
		{"not ready", watch.Event{Type: watch.Modified, Object: claimWith("2", "", ready("False", "SandboxNotReady", "pod pending"))}, false, nil, "SandboxNotReady"},
		{"ready but unbound", watch.Event{Type: watch.Modified, Object: claimWith("2", "", ready("True", "DependenciesReady", ""))}, false, nil, "DependenciesReady"},
		{"ready and bound", watch.Event{Type: watch.Modified, Object: claimWith("3", "sb", ready("True", "DependenciesReady", ""))}, true, nil, "DependenciesReady"},
		{"template missing fails fast", watch.Event{Type: watch.Modified, Object: claimWith("3", "", ready("False", extensionsv1beta1.ClaimReasonTemplateNotFound, "no tpl"))}, false, ErrClaimFailed, extensionsv1beta1.ClaimReasonTemplateNotFound},
		{"expired fails fast", watch.Event{Type: watch.Modified, Object: claimWith("3", "sb", ready("False", extensionsv1beta1.ClaimReasonExpired, ""))}, false, ErrClaimFailed, extensionsv1beta1.ClaimReasonExpired},
		{"an image that cannot host sandboxd fails fast", watch.Event{Type: watch.Modified, Object: claimWith("3", "sb", ready("False", agentsv1beta1.SandboxReasonImageIncompatible, "no /bin/sh"))}, false, ErrClaimFailed, agentsv1beta1.SandboxReasonImageIncompatible},
		{"unknown keeps waiting", watch.Event{Type: watch.Modified, Object: claimWith("3", "sb", ready("Unknown", "ReconcilerError", "boom"))}, false, nil, "ReconcilerError"},
		{"deleted", watch.Event{Type: watch.Deleted, Object: claimWith("4", "sb")}, false, ErrSandboxGone, ""},
		{"foreign object ignored", watch.Event{Type: watch.Modified, Object: &metav1.Status{}}, false, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &waiter{object: "SandboxClaim", namespace: "ns", name: "c"}
			done, err := w.claimReady(tt.ev)
			if done != tt.wantDone {
				t.Errorf("done = %v, want %v", done, tt.wantDone)
			}
			if !errors.Is(err, tt.wantKind) || (tt.wantKind == nil && err != nil) {
				t.Errorf("err = %v, want kind %v", err, tt.wantKind)
			}
			if diff := cmp.Diff(tt.wantReason, w.last.Reason); diff != "" {
				t.Errorf("last reason (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeLW serves one list, then hands out the watchers in order; each re-list after a closed
// watch returns the same list.
type fakeLW struct {
	list     *extensionsv1beta1.SandboxClaimList
	watchers chan watch.Interface
}

func newFakeLW(items ...extensionsv1beta1.SandboxClaim) *fakeLW {
	return &fakeLW{
		list:     &extensionsv1beta1.SandboxClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: items},
		watchers: make(chan watch.Interface, 4),
	}
}

func (f *fakeLW) lw() cache.ListerWatcher {
	return &listWatch{cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) { return f.list.DeepCopy(), nil },
		WatchFuncWithContext: func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
			select {
			case w := <-f.watchers:
				return w, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	}}
}

func (f *fakeLW) watcher() *watch.FakeWatcher {
	w := watch.NewFake()
	f.watchers <- w
	return w
}

// runUntil waits in the background; seen receives the resource version of every event the
// condition has handled.
func runUntil(ctx context.Context, lw cache.ListerWatcher) (done chan error, seen chan string) {
	w := &waiter{object: "SandboxClaim", namespace: "ns", name: "c"}
	done, seen = make(chan error, 1), make(chan string, 16)
	cond := func(ev watch.Event) (bool, error) {
		ok, err := w.claimReady(ev)
		if c, isClaim := ev.Object.(*extensionsv1beta1.SandboxClaim); isClaim {
			seen <- c.ResourceVersion
		}
		return ok, err
	}
	go func() {
		_, err := w.until(ctx, lw, &extensionsv1beta1.SandboxClaim{}, cond)
		done <- err
	}()
	return done, seen
}

func TestUntilReadyAfterEvents(t *testing.T) {
	f := newFakeLW(*claimWith("1", ""))
	fw := f.watcher()
	done, _ := runUntil(context.Background(), f.lw())
	fw.Modify(claimWith("2", "", ready("False", "SandboxNotReady", "pod pending")))
	fw.Modify(claimWith("3", "sb", ready("True", "DependenciesReady", "")))
	if err := <-done; err != nil {
		t.Fatalf("until = %v, want Ready", err)
	}
}

// TestUntilResumesAfterDroppedWatch closes the first watch: the wait re-lists, watches again and
// still sees Ready.
func TestUntilResumesAfterDroppedWatch(t *testing.T) {
	f := newFakeLW(*claimWith("1", ""))
	first := f.watcher()
	done, _ := runUntil(context.Background(), f.lw())
	first.Stop() // the API server dropped the watch
	second := f.watcher()
	second.Modify(claimWith("5", "sb", ready("True", "DependenciesReady", "")))
	if err := <-done; err != nil {
		t.Fatalf("until = %v, want Ready after the watch resumed", err)
	}
}

func TestUntilDeadlineNamesLastReason(t *testing.T) {
	f := newFakeLW(*claimWith("1", ""))
	fw := f.watcher()
	ctx, cancel := context.WithCancel(context.Background())
	done, seen := runUntil(ctx, f.lw())
	fw.Modify(claimWith("2", "", ready("False", "SandboxNotReady", "pod pending")))
	for rv := <-seen; rv != "2"; rv = <-seen {
	}
	cancel()
	err := <-done
	var ce *ClaimError
	if !errors.As(err, &ce) || !errors.Is(err, ErrNotReady) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a *ClaimError wrapping ErrNotReady and context.Canceled", err)
	}
	if ce.Reason != "SandboxNotReady" || ce.Message != "pod pending" {
		t.Errorf("last condition = %q/%q, want SandboxNotReady/pod pending (err: %v)", ce.Reason, ce.Message, err)
	}
}

func TestUntilObjectMissing(t *testing.T) {
	f := newFakeLW()
	f.watcher()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done, _ := runUntil(ctx, f.lw())
	if err := <-done; !errors.Is(err, ErrSandboxGone) {
		t.Fatalf("err = %v, want ErrSandboxGone", err)
	}
}

func TestUntilDeleted(t *testing.T) {
	f := newFakeLW(*claimWith("1", ""))
	fw := f.watcher()
	done, _ := runUntil(context.Background(), f.lw())
	fw.Delete(claimWith("2", ""))
	if err := <-done; !errors.Is(err, ErrSandboxGone) {
		t.Fatalf("err = %v, want ErrSandboxGone", err)
	}
}

func TestSandboxConditionStateMachine(t *testing.T) {
	sb := func(gen int64, status metav1.ConditionStatus) *agentsv1beta1.Sandbox {
		s := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb"}}
		s.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.SandboxConditionSuspended, Status: status,
			Reason: "R", ObservedGeneration: gen}}
		return s
	}
	tests := []struct {
		name     string
		ev       watch.Event
		wantDone bool
		wantKind error
	}{
		{"true at the written generation", watch.Event{Type: watch.Modified, Object: sb(3, metav1.ConditionTrue)}, true, nil},
		{"true at a later generation", watch.Event{Type: watch.Modified, Object: sb(4, metav1.ConditionTrue)}, true, nil},
		{"stale true from before the patch", watch.Event{Type: watch.Modified, Object: sb(2, metav1.ConditionTrue)}, false, nil},
		{"false", watch.Event{Type: watch.Modified, Object: sb(3, metav1.ConditionFalse)}, false, nil},
		{"no condition", watch.Event{Type: watch.Added, Object: &agentsv1beta1.Sandbox{}}, false, nil},
		{"deleted", watch.Event{Type: watch.Deleted, Object: sb(3, metav1.ConditionFalse)}, false, ErrSandboxGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &waiter{object: "Sandbox", namespace: "ns", name: "sb"}
			done, err := w.sandboxCondition(agentsv1beta1.SandboxConditionSuspended, 3)(tt.ev)
			if done != tt.wantDone || !errors.Is(err, tt.wantKind) || (tt.wantKind == nil && err != nil) {
				t.Errorf("got (%v, %v), want (%v, %v)", done, err, tt.wantDone, tt.wantKind)
			}
		})
	}
}

// TestUntilListsConsistently serves lists at resourceVersion "0" from a stale cache that has not
// seen the claim yet, as the API server's watch cache may right after a create: the wait must
// not take the claim for gone.
func TestUntilListsConsistently(t *testing.T) {
	claim := claimWith("", "sb", ready("True", "DependenciesReady", ""))
	staleCache := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		var lo client.ListOptions
		lo.ApplyOptions(opts)
		if lo.Raw != nil && lo.Raw.ResourceVersion == "0" {
			return nil // an empty list: the cache lags behind the create
		}
		return c.List(ctx, list, opts...)
	}}
	kube := fake.NewClientBuilder().WithScheme(apiScheme(t)).WithObjects(claim).WithInterceptorFuncs(staleCache).
		WithIndex(&extensionsv1beta1.SandboxClaim{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).Build()
	w := &waiter{object: "SandboxClaim", namespace: "ns", name: "c"}
	lw := newListWatch(kube, "ns", "c", func() client.ObjectList { return &extensionsv1beta1.SandboxClaimList{} })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := w.until(ctx, lw, &extensionsv1beta1.SandboxClaim{}, w.claimReady); err != nil {
		t.Fatalf("until = %v, want the ready claim", err)
	}
}

// apiScheme knows Paddock's API types, for the fake client of error-injection tests.
func apiScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{agentsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}
