package sandboxclaim

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/controller/indexes"
	"github.com/paddock-dev/paddock/internal/warmqueue"
)

// These tests use the fake client only to inject API errors that a real server cannot be made
// to return on cue; the behaviour without injected errors is proven in test/integration.

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func fixtures() (*extensionsv1beta1.SandboxTemplate, *extensionsv1beta1.SandboxWarmPool, []client.Object) {
	tpl := &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "ns", UID: "tpl-uid"}}
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"},
		Spec: extensionsv1beta1.SandboxWarmPoolSpec{TemplateRef: extensionsv1beta1.SandboxTemplateRef{Name: "tpl"}}}
	objs := []client.Object{tpl, pool}
	for _, name := range []string{"m1", "m2"} {
		sb := blueprint.PoolMember(pool, tpl, blueprint.PoolOptions{})
		sb.GenerateName, sb.Name = "", name
		sb.Status.PodIPs = []string{"198.18.0.1"}
		sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue, Reason: "DependenciesReady", LastTransitionTime: metav1.Now()}}
		objs = append(objs, sb)
	}
	claim := &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "claim-uid", CreationTimestamp: metav1.Now()},
		Spec: extensionsv1beta1.SandboxClaimSpec{WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: "pool"}}}
	return tpl, pool, append(objs, claim)
}

func newFake(t *testing.T, objs []client.Object, funcs interceptor.Funcs) client.WithWatch {
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(objs...).
		WithStatusSubresource(&extensionsv1beta1.SandboxClaim{}, &agentsv1beta1.Sandbox{}).
		WithIndex(&agentsv1beta1.Sandbox{}, agentsv1beta1.SandboxClaimUIDIndex, indexes.SandboxByClaimUID).
		Build()
	return interceptor.NewClient(c, funcs)
}

func queueOf(names ...string) *warmqueue.Queues {
	q := warmqueue.New()
	for _, n := range names {
		q.Add(warmqueue.Key{Namespace: "ns", Pool: "pool"}, warmqueue.Member{Name: n})
	}
	return q
}

func reconcileClaim(t *testing.T, r *Reconciler) error {
	t.Helper()
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "c"}})
	return err
}

func controllerOf(t *testing.T, c client.Client, name string) string {
	t.Helper()
	sb := &agentsv1beta1.Sandbox{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, sb); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(sb); ref != nil {
		return ref.Kind + "/" + ref.Name
	}
	return ""
}

// TestAdoptionConflictTakesTheNextCandidate: a member changed under the claim (409) is skipped
// and the next one adopted, in the same pass.
func TestAdoptionConflictTakesTheNextCandidate(t *testing.T) {
	_, _, objs := fixtures()
	base := newFake(t, objs, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if obj.GetName() == "m1" {
			return apierrors.NewConflict(schema.GroupResource{Resource: "sandboxes"}, "m1", errors.New("changed"))
		}
		return c.Patch(ctx, obj, patch, opts...)
	}})
	r := newReconciler(t, base, Options{APIReader: base, Queue: queueOf("m1", "m2")})
	if err := reconcileClaim(t, r); err != nil {
		t.Fatal(err)
	}
	if got := controllerOf(t, base, "m2"); got != "SandboxClaim/c" {
		t.Errorf("m2 controller = %q, want the claim", got)
	}
	if got := controllerOf(t, base, "m1"); got != "SandboxWarmPool/pool" {
		t.Errorf("m1 controller = %q, want still the pool", got)
	}
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := base.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "c"}, claim); err != nil {
		t.Fatal(err)
	}
	if claim.Status.Sandbox.Name != "m2" {
		t.Errorf("claim status names %q, want m2", claim.Status.Sandbox.Name)
	}
}

// TestLostAdoptionAnswerNeverBindsTwice: the adoption patch is applied but its answer is lost
// and the cache does not show it yet; the next pass must find the adopted Sandbox through the API
// server instead of taking another member.
func TestLostAdoptionAnswerNeverBindsTwice(t *testing.T) {
	_, _, objs := fixtures()
	lose := true
	raw := newFake(t, objs, interceptor.Funcs{})
	cached := interceptor.NewClient(raw, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			err := c.Patch(ctx, obj, patch, opts...)
			if lose && err == nil {
				lose = false
				return apierrors.NewTimeoutError("answer lost", 1)
			}
			return err
		},
		// A lagging cache: it does not show Sandboxes bound to claims yet.
		List: listsNoSandboxesWhile(ptr.To(true)),
	})
	r := newReconciler(t, cached, Options{APIReader: raw, Queue: queueOf("m1", "m2"), Clock: clocktesting.NewFakePassiveClock(time.Now().Add(time.Minute))})
	if err := reconcileClaim(t, r); err == nil {
		t.Fatal("first pass hid the lost answer")
	}
	if err := reconcileClaim(t, r); err != nil {
		t.Fatalf("second pass: %v", err)
	}
	bound := 0
	for _, name := range []string{"m1", "m2"} {
		if controllerOf(t, raw, name) == "SandboxClaim/c" {
			bound++
		}
	}
	if bound != 1 {
		t.Errorf("claim controls %d Sandboxes, want exactly 1", bound)
	}
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := raw.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "c"}, claim); err != nil {
		t.Fatal(err)
	}
	if claim.Status.Sandbox.Name != "m1" {
		t.Errorf("claim status names %q, want m1 (the one adopted with the lost answer)", claim.Status.Sandbox.Name)
	}
}

// TestLaggingCacheNeverBindsTwice: right after an adoption the cache still shows the claim
// without status and the member as the pool's; the next pass must not take a second member.
func TestLaggingCacheNeverBindsTwice(t *testing.T) {
	_, _, objs := fixtures()
	raw := newFake(t, objs, interceptor.Funcs{})
	snapshot := map[string]client.Object{}
	for _, o := range objs {
		snapshot[o.GetName()] = o.DeepCopyObject().(client.Object)
	}
	lagging := false
	cached := interceptor.NewClient(raw, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil || !lagging {
				return err
			}
			// Serve the state from before the first pass, with the server's resourceVersion
			// so that writes still go through.
			old := snapshot[key.Name].DeepCopyObject().(client.Object)
			old.SetResourceVersion(obj.GetResourceVersion())
			return scheme(t).Convert(old, obj, nil)
		},
		List: listsNoSandboxesWhile(&lagging),
	})
	r := newReconciler(t, cached, Options{APIReader: raw, Queue: queueOf("m1", "m2")})
	if err := reconcileClaim(t, r); err != nil {
		t.Fatal(err)
	}
	lagging = true
	r.queue.Add(warmqueue.Key{Namespace: "ns", Pool: "pool"}, warmqueue.Member{Name: "m1"}) // a late event re-queues it
	if err := reconcileClaim(t, r); err != nil {
		t.Fatal(err)
	}
	bound := 0
	for _, name := range []string{"m1", "m2"} {
		if controllerOf(t, raw, name) == "SandboxClaim/c" {
			bound++
		}
	}
	if bound != 1 {
		t.Errorf("claim controls %d Sandboxes, want exactly 1", bound)
	}
}

// TestAdoptionAnswerServesALaggingCache: right after an adoption the cache still shows the
// member exactly as the adoption found it. The next pass takes the adopted Sandbox from the
// adoption's answer instead of asking the API server, binds nothing else and writes nothing. When
// the cache shows a version the adoption did not make, the pass asks the API server.
func TestAdoptionAnswerServesALaggingCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cachedVersion is the resourceVersion the lagging cache shows for the adopted member,
		// given the one the adoption found.
		cachedVersion func(before string) string
		wantReads     int
	}{
		{"the cache shows the member as adopted", func(before string) string { return before }, 0},
		{"the cache shows another version", func(string) string { return "1" }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, objs := fixtures()
			raw := newFake(t, objs, interceptor.Funcs{})
			snapshot := map[string]client.Object{}
			for _, o := range objs {
				if err := raw.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
					t.Fatal(err)
				}
				snapshot[o.GetName()] = o.DeepCopyObject().(client.Object)
			}
			lagging := false
			// The cache: after the first pass it serves the claim as the API server has it (so
			// the pass knows the binding's name) and the Sandboxes as they were before it.
			cached := interceptor.NewClient(raw, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, isSandbox := obj.(*agentsv1beta1.Sandbox); !lagging || !isSandbox {
						return c.Get(ctx, key, obj, opts...)
					}
					old := snapshot[key.Name].DeepCopyObject().(client.Object)
					old.SetResourceVersion(tc.cachedVersion(old.GetResourceVersion()))
					return scheme(t).Convert(old, obj, nil)
				},
				List: listsNoSandboxesWhile(&lagging),
			})
			reads := 0
			apiReader := interceptor.NewClient(raw, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					reads++
					return c.Get(ctx, key, obj, opts...)
				},
			})
			writes := 0
			counted := interceptor.NewClient(cached, interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					writes++
					return c.Patch(ctx, obj, patch, opts...)
				},
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					writes++
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
			})
			r := newReconciler(t, counted, Options{APIReader: apiReader, Queue: queueOf("m1", "m2")})
			if err := reconcileClaim(t, r); err != nil {
				t.Fatal(err)
			}
			firstPass := writes
			lagging, reads = true, 0
			if err := reconcileClaim(t, r); err != nil {
				t.Fatal(err)
			}
			if reads != tc.wantReads {
				t.Errorf("second pass read the API server %d times, want %d", reads, tc.wantReads)
			}
			if writes != firstPass {
				t.Errorf("second pass wrote %d times, want none", writes-firstPass)
			}
			if got := []string{controllerOf(t, raw, "m1"), controllerOf(t, raw, "m2")}; got[0] != "SandboxClaim/c" || got[1] != "SandboxWarmPool/pool" {
				t.Errorf("controllers of m1, m2 = %q, want the claim and the pool", got)
			}
		})
	}
}

// listsNoSandboxesWhile is a lagging cache's List: while *lagging, it shows no Sandbox, as a cache
// that has not seen a binding shows none of the claim's.
func listsNoSandboxesWhile(lagging *bool) func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
	return func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if sbs, ok := list.(*agentsv1beta1.SandboxList); ok && *lagging {
			sbs.Items = nil
		}
		return nil
	}
}

// TestStalePassDoesNotRepeatTheStatusWrite: a pass that runs before the cache shows the claim's
// last status write (one started by the adopted Sandbox's event) computes that status again from
// the same stale claim; it must not send it again. This is what lastWrite is kept for
// (docs/design/cache-lag.md).
func TestStalePassDoesNotRepeatTheStatusWrite(t *testing.T) {
	_, _, objs := fixtures()
	stale := objs[len(objs)-1].(*extensionsv1beta1.SandboxClaim).DeepCopy()
	statusWrites := 0
	raw := newFake(t, objs, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*extensionsv1beta1.SandboxClaim); ok {
				statusWrites++
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	if err := raw.Get(context.Background(), client.ObjectKeyFromObject(stale), stale); err != nil {
		t.Fatal(err)
	}
	cached := interceptor.NewClient(raw, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if claim, ok := obj.(*extensionsv1beta1.SandboxClaim); ok {
				stale.DeepCopyInto(claim) // the cache never shows the status write
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r := newReconciler(t, cached, Options{APIReader: raw, Queue: queueOf("m1", "m2")})
	for range 2 {
		if err := reconcileClaim(t, r); err != nil {
			t.Fatal(err)
		}
	}
	if statusWrites != 1 {
		t.Errorf("two passes on a stale claim wrote its status %d times, want 1", statusWrites)
	}
}

// newReconciler is New for tests, failing t on an error.
func newReconciler(t *testing.T, c client.Client, opts Options) *Reconciler {
	t.Helper()
	r, err := New(c, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPoolNotYetCachedIsNotMissing: a pool created just before its claim (the E2B front door's
// fork) may be absent from the cache on the claim's first pass. The pass asks the API server and
// adopts a member, instead of telling the claim that its pool does not exist (which the front
// door takes as final: CI, stop 37, "WarmPoolNotFound" on a fork). The fake client stands in for
// a cache that has not seen the pool and template yet.
func TestPoolNotYetCachedIsNotMissing(t *testing.T) {
	_, _, objs := fixtures()
	raw := newFake(t, objs, interceptor.Funcs{})
	cached := interceptor.NewClient(raw, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			switch obj.(type) {
			case *extensionsv1beta1.SandboxWarmPool:
				return apierrors.NewNotFound(schema.GroupResource{Group: extensionsv1beta1.GroupVersion.Group, Resource: "sandboxwarmpools"}, key.Name)
			case *extensionsv1beta1.SandboxTemplate:
				return apierrors.NewNotFound(schema.GroupResource{Group: extensionsv1beta1.GroupVersion.Group, Resource: "sandboxtemplates"}, key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r := newReconciler(t, cached, Options{APIReader: raw, Queue: queueOf("m1")})
	if err := reconcileClaim(t, r); err != nil {
		t.Fatal(err)
	}
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := raw.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "c"}, claim); err != nil {
		t.Fatal(err)
	}
	for _, c := range claim.Status.Conditions {
		if c.Reason == extensionsv1beta1.ClaimReasonWarmPoolNotFound || c.Reason == extensionsv1beta1.ClaimReasonTemplateNotFound {
			t.Errorf("claim condition %s %s: %s; the pool and template exist on the API server", c.Type, c.Reason, c.Message)
		}
	}
	if got := controllerOf(t, raw, "m1"); got != "SandboxClaim/c" {
		t.Errorf("m1 is controlled by %q, want SandboxClaim/c: the claim adopts though its cache lags", got)
	}
}
