package sandboxwarmpool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/controller/indexes"
)

// TestLaggingCacheNeverOverCreates uses the fake client only to inject what a real API server
// cannot be made to do on cue: a cache that does not show the members just created. Passes
// that see no members must not create the pool again.
func TestLaggingCacheNeverOverCreates(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	tpl := &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "ns"}}
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"},
		Spec: extensionsv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](5), TemplateRef: extensionsv1beta1.SandboxTemplateRef{Name: "tpl"}}}
	raw := fake.NewClientBuilder().WithScheme(s).WithObjects(tpl, pool).
		WithStatusSubresource(&extensionsv1beta1.SandboxWarmPool{}).
		WithIndex(&agentsv1beta1.Sandbox{}, agentsv1beta1.SandboxWarmPoolIndex, indexes.SandboxByWarmPool).Build()
	var generated atomic.Int32
	lagging := interceptor.NewClient(raw, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			// The fake client does not implement generateName.
			obj.SetName(fmt.Sprintf("%s%d", obj.GetGenerateName(), generated.Add(1)))
			return c.Create(ctx, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*agentsv1beta1.SandboxList); ok {
				return nil // the cache has not seen any member yet
			}
			return c.List(ctx, list, opts...)
		},
	})
	r, err := New(lagging, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "pool"}}); err != nil {
			t.Fatal(err)
		}
	}
	var all agentsv1beta1.SandboxList
	if err := raw.List(context.Background(), &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 5 {
		t.Errorf("four passes on a lagging cache made %d members, want the 5 replicas", len(all.Items))
	}
	// The watch reports the members, but the pool's list does not show them yet: the pool must
	// still wait, or it would count too few members and create again.
	for range 5 {
		r.expectations.CreationObserved("ns/pool")
	}
	if r.expectations.Satisfied("ns/pool") {
		t.Error("expectations satisfied while the member list shows none of the created members")
	}
	// The list catches up: the pool may act again, and finds nothing to do.
	r.expectations.Listed("ns/pool", memberUIDs(all.Items))
	if !r.expectations.Satisfied("ns/pool") {
		t.Error("expectations not satisfied after every create was observed and listed")
	}
}

// A pass whose creates fail returns the error alone: a requeue next to it (here the recheck of
// unobserved writes) would be dropped by controller-runtime with a warning. The fake client only
// injects the failure.
func TestFailedPassReturnsNoRequeue(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	tpl := &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "ns"}}
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"},
		Spec: extensionsv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](2), TemplateRef: extensionsv1beta1.SandboxTemplateRef{Name: "tpl"}}}
	var generated atomic.Int32
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(tpl, pool).
		WithStatusSubresource(&extensionsv1beta1.SandboxWarmPool{}).
		WithIndex(&agentsv1beta1.Sandbox{}, agentsv1beta1.SandboxWarmPoolIndex, indexes.SandboxByWarmPool).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if generated.Add(1) > 1 {
					return fmt.Errorf("injected create failure")
				}
				obj.SetName(fmt.Sprintf("%s%d", obj.GetGenerateName(), generated.Load())) // no generateName in the fake
				return c.Create(ctx, obj, opts...)
			},
		}).Build()
	r, err := New(c, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "pool"}})
	if err == nil || res != (ctrl.Result{}) {
		t.Errorf("Reconcile = %+v, %v; want no requeue and the create failure", res, err)
	}
}

// Members the API server refuses as invalid were built from the template, which only a user can
// fix: the pass's error is terminal (not retried; the pool's and the template's watches bring
// the pass after the fix), and MembersCreated names the refused field. The fake client only
// injects the refusal.
func TestInvalidMembersAreTerminal(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	tpl := &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "ns"}}
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"},
		Spec: extensionsv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](2), TemplateRef: extensionsv1beta1.SandboxTemplateRef{Name: "tpl"}}}
	refused := field.Invalid(field.NewPath("spec", "podTemplate", "spec", "containers").Index(0).Child("ports").Index(0).Child("containerPort"), 0, "must be between 1 and 65535")
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(tpl, pool).
		WithStatusSubresource(&extensionsv1beta1.SandboxWarmPool{}).
		WithIndex(&agentsv1beta1.Sandbox{}, agentsv1beta1.SandboxWarmPoolIndex, indexes.SandboxByWarmPool).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
				return apierrors.NewInvalid(agentsv1beta1.GroupVersion.WithKind("Sandbox").GroupKind(), obj.GetGenerateName(), field.ErrorList{refused})
			},
		}).Build()
	r, err := New(c, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "pool"}})
	if !errors.Is(err, reconcile.TerminalError(nil)) || res != (ctrl.Result{}) {
		t.Fatalf("Reconcile = %+v, %v; want a terminal error and no requeue", res, err)
	}
	got := &extensionsv1beta1.SandboxWarmPool{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "pool"}, got); err != nil {
		t.Fatal(err)
	}
	created := meta.FindStatusCondition(got.Status.Conditions, extensionsv1beta1.PoolConditionMembersCreated)
	if created == nil || created.Status != metav1.ConditionFalse || !strings.Contains(created.Message, refused.Field) {
		t.Errorf("MembersCreated = %+v, want False naming %s", created, refused.Field)
	}
}
