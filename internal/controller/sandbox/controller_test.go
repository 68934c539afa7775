package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/controller/indexes"
	"github.com/paddock-dev/paddock/internal/naming"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := agentsv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewValidatesOptions(t *testing.T) {
	s := testScheme(t)
	c := fake.NewClientBuilder().WithScheme(s).Build()
	rec := events.NewFakeRecorder(1)
	for _, tt := range []struct {
		name    string
		c       client.Client
		opts    Options
		wantErr string
	}{
		{name: "defaults"},
		{name: "no client", c: nil, wantErr: "needs a client"},
		{name: "negative workers", opts: Options{Workers: -1}, wantErr: "Workers is -1"},
		{name: "negative status coalesce window", opts: Options{StatusCoalesceWindow: -time.Second}, wantErr: "StatusCoalesceWindow is -1s"},
		{name: "negative write-behind window", opts: Options{WriteBehindWindow: -time.Second}, wantErr: "WriteBehindWindow is -1s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cl := c
			if tt.name == "no client" {
				cl = nil
			}
			r, err := New(cl, rec, tt.opts)
			if tt.wantErr == "" {
				if err != nil || r.opts.ClusterDomain != DefaultClusterDomain || r.opts.Workers != DefaultWorkers || r.opts.Clock == nil || r.writes.podPatchWindow != 0 {
					t.Fatalf("New = %+v, %v; want defaults", r, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestScheduleExpiry(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r := &Reconciler{opts: Options{Clock: clocktesting.NewFakePassiveClock(now)}}
	for _, tt := range []struct {
		name        string
		shutdown    *time.Time
		want        ctrl.Result
		wantExpired bool
	}{
		{name: "no shutdown time", want: ctrl.Result{}},
		{name: "far", shutdown: ptr.To(now.Add(10 * time.Minute)), want: ctrl.Result{RequeueAfter: 10 * time.Minute}},
		{name: "near is bounded", shutdown: ptr.To(now.Add(time.Second)), want: ctrl.Result{RequeueAfter: minExpiryRequeue}},
		{name: "reached during the pass", shutdown: ptr.To(now), want: ctrl.Result{RequeueAfter: expiryTeardownDelay}, wantExpired: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sb := sandbox()
			if tt.shutdown != nil {
				sb.Spec.ShutdownTime = &metav1.Time{Time: *tt.shutdown}
			}
			if diff := cmp.Diff(tt.want, r.scheduleExpiry(sb)); diff != "" {
				t.Errorf("scheduleExpiry (-want +got):\n%s", diff)
			}
			if got := markedExpired(sb); got != tt.wantExpired {
				t.Errorf("marked expired = %v, want %v", got, tt.wantExpired)
			}
		})
	}
}

// Events follow a successful status write only, and the MultiplePods warning is emitted once per
// transition. The fake client is used only to make the status write fail.
func TestEventsFollowStatusWrite(t *testing.T) {
	s := testScheme(t)
	sb := sandbox()
	ref := *metav1.NewControllerRef(sb, agentsv1beta1.GroupVersion.WithKind("Sandbox"))
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", OwnerReferences: []metav1.OwnerReference{ref},
			Labels: map[string]string{agentsv1beta1.SandboxNameHashLabel: naming.NameHash("sb")}}}
	}
	failStatus := true
	c := fake.NewClientBuilder().WithScheme(s).
		WithStatusSubresource(&agentsv1beta1.Sandbox{}).
		WithIndex(&corev1.Pod{}, agentsv1beta1.PodNameHashIndex, indexes.PodBySandboxNameHash).
		WithObjects(sb, pod("sb"), pod("sb-2")).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if failStatus {
					return errors.New("injected status failure")
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	rec := events.NewFakeRecorder(10)
	r, err := New(c, rec, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sb)}

	if _, err := r.Reconcile(context.Background(), req); err == nil || !strings.Contains(err.Error(), "injected status failure") {
		t.Fatalf("Reconcile error = %v, want the status write failure", err)
	}
	if n := len(rec.Events); n != 0 {
		t.Fatalf("%d events emitted after a failed status write, want 0", n)
	}

	failStatus = false
	for pass := 0; pass < 2; pass++ {
		// Several owned Pods are a terminal error, not retried: only a human can resolve them.
		if _, err := r.Reconcile(context.Background(), req); !errors.Is(err, reconcile.TerminalError(nil)) {
			t.Fatalf("pass %d: Reconcile error = %v, want a terminal error", pass, err)
		}
	}
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d events after two passes, want 1", n)
	}
	if e := <-rec.Events; !strings.Contains(e, "Warning MultiplePods") {
		t.Errorf("event %q, want a MultiplePods warning", e)
	}
}

func TestMetricLabels(t *testing.T) {
	claimRef := metav1.OwnerReference{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxClaim", Name: "c", UID: "u", Controller: ptr.To(true)}
	for _, tt := range []struct {
		name string
		sb   *agentsv1beta1.Sandbox
		want sandboxLabels
	}{
		{
			name: "plain",
			sb:   sandbox(),
			want: sandboxLabels{namespace: "ns", ready: "false", expired: "false", launchType: "cold", template: "unknown", ownedBy: "None", createdBy: "unknown"},
		},
		{
			name: "claimed warm ready",
			sb: sandbox(func(sb *agentsv1beta1.Sandbox) {
				sb.Labels = map[string]string{agentsv1beta1.LaunchTypeLabel: "warm", agentsv1beta1.CreatedByLabel: "someone"}
				sb.Annotations = map[string]string{agentsv1beta1.SandboxTemplateRefAnnotation: "tpl"}
				sb.OwnerReferences = []metav1.OwnerReference{claimRef}
				sb.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "DependenciesReady"}}
			}),
			want: sandboxLabels{namespace: "ns", ready: "true", expired: "false", launchType: "warm", template: "tpl", ownedBy: "SandboxClaim", createdBy: "unknown"},
		},
		{
			name: "expired",
			sb: sandbox(func(sb *agentsv1beta1.Sandbox) {
				sb.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: agentsv1beta1.SandboxReasonExpired}}
			}),
			want: sandboxLabels{namespace: "ns", ready: "false", expired: "true", launchType: "cold", template: "unknown", ownedBy: "None", createdBy: "unknown"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, labelsOf(tt.sb), cmp.AllowUnexported(sandboxLabels{})); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

// A Pod the API server has but the cache does not show yet (created a pass ago) is read through
// the API reader instead of failing the pass. The fake clients only simulate the lagging cache.
func TestCreatePodReadsPastALaggingCache(t *testing.T) {
	s := testScheme(t)
	sb := sandbox()
	ref := *metav1.NewControllerRef(sb, agentsv1beta1.GroupVersion.WithKind("Sandbox"))
	existing := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{ref}}}
	apiServer := fake.NewClientBuilder().WithScheme(s).WithObjects(existing).Build()
	laggingCache := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, _ client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return apiServer.Create(ctx, obj, opts...) // AlreadyExists: the Pod is there
		},
	}).Build()

	for _, tt := range []struct {
		name    string
		opts    Options
		wantErr bool
	}{
		{name: "without an API reader the cache miss is an error", wantErr: true},
		{name: "with the API reader the Pod is found", opts: Options{APIReader: apiServer}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(laggingCache, events.NewFakeRecorder(10), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			created, found, err := r.createPod(context.Background(), sb, &rootfsObservation{}, &memoryObservation{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("createPod error = %v, want error: %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if created != nil || found == nil || found.Name != "sb" {
				t.Errorf("createPod = created %v, existing %v; want the existing Pod sb", created, found)
			}
		})
	}
}

// A pass that fails returns no requeue next to its error: controller-runtime would drop it with
// a warning, and the error's backoff is what retries the pass. The fake client only injects the
// Pod create failure.
func TestFailedPassReturnsNoRequeue(t *testing.T) {
	s := testScheme(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sb := sandbox(func(sb *agentsv1beta1.Sandbox) { sb.Spec.ShutdownTime = &metav1.Time{Time: now.Add(time.Hour)} })
	c := fake.NewClientBuilder().WithScheme(s).
		WithStatusSubresource(&agentsv1beta1.Sandbox{}).
		WithIndex(&corev1.Pod{}, agentsv1beta1.PodNameHashIndex, indexes.PodBySandboxNameHash).
		WithObjects(sb).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*corev1.Pod); ok {
					return errors.New("injected pod create failure")
				}
				return c.Create(ctx, obj, opts...)
			},
		}).Build()
	opts := DefaultOptions()
	opts.StatusCoalesceWindow = 0
	opts.Clock = clocktesting.NewFakePassiveClock(now)
	r, err := New(c, events.NewFakeRecorder(10), opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sb)})
	if err == nil || res != (ctrl.Result{}) {
		t.Errorf("Reconcile = %+v, %v; want no requeue and the Pod create failure", res, err)
	}
}

// A Pod the API server refuses as invalid was built from what the user wrote in
// spec.podTemplate: the pass's error is terminal (controller-runtime does not retry it; the
// Sandbox's watch brings the pass after the fix) and Ready says which field to fix. Any other
// Pod create failure is retried.
func TestInvalidPodIsTerminal(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "sb", field.ErrorList{
		field.Required(field.NewPath("spec", "containers").Index(0).Child("image"), ""),
	})
	for _, tt := range []struct {
		name         string
		createErr    error
		wantTerminal bool
		wantMessage  []string
	}{
		{name: "invalid", createErr: invalid, wantTerminal: true,
			wantMessage: []string{"fix spec.podTemplate", "spec.containers[0].image: Required value"}},
		{name: "unavailable", createErr: apierrors.NewServiceUnavailable("etcd is down"),
			wantMessage: []string{`creating pod "sb" for sandbox "sb"`, "etcd is down"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sb := sandbox()
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).
				WithStatusSubresource(&agentsv1beta1.Sandbox{}).
				WithIndex(&corev1.Pod{}, agentsv1beta1.PodNameHashIndex, indexes.PodBySandboxNameHash).
				WithObjects(sb).
				WithInterceptorFuncs(interceptor.Funcs{
					Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
						if _, ok := obj.(*corev1.Pod); ok {
							return tt.createErr
						}
						return c.Create(ctx, obj, opts...)
					},
				}).Build()
			opts := DefaultOptions()
			opts.StatusCoalesceWindow = 0
			r, err := New(c, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sb)})
			if err == nil || res != (ctrl.Result{}) || errors.Is(err, reconcile.TerminalError(nil)) != tt.wantTerminal {
				t.Fatalf("Reconcile = %+v, %v; want no requeue and an error, terminal: %v", res, err, tt.wantTerminal)
			}
			got := &agentsv1beta1.Sandbox{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(sb), got); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionReady)
			if ready == nil || ready.Reason != agentsv1beta1.SandboxReasonReconcilerError {
				t.Fatalf("Ready = %+v, want False with reason %s", ready, agentsv1beta1.SandboxReasonReconcilerError)
			}
			for _, want := range tt.wantMessage {
				if !strings.Contains(ready.Message, want) {
					t.Errorf("Ready message %q does not contain %q", ready.Message, want)
				}
			}
			if strings.Contains(ready.Message, "terminal error") {
				t.Errorf("Ready message %q speaks of the work queue, not of the Sandbox", ready.Message)
			}
		})
	}
}
