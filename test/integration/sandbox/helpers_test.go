package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

const testTimeout = 3 * time.Minute

// start gives a test its context and namespace, and checks on cleanup that the reconciler never
// wrote status twice in one pass there.
func start(t testing.TB) (context.Context, string) {
	t.Helper()
	ctx := framework.Context(t, testTimeout)
	ns := env.Namespace(t)
	t.Cleanup(func() { checkOneStatusWritePerPass(t, ns) })
	return ctx, ns
}

func create(t testing.TB, ctx context.Context, obj client.Object) {
	t.Helper()
	framework.MustCreate(t, ctx, env.Client, obj)
}

func key(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }

// waitSandbox polls the Sandbox until check passes and returns it.
func waitSandbox(t testing.TB, sb *agentsv1beta1.Sandbox, check func(*agentsv1beta1.Sandbox) error) *agentsv1beta1.Sandbox {
	t.Helper()
	got := &agentsv1beta1.Sandbox{}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, key(sb), got); err != nil {
			return err
		}
		if err := check(got); err != nil {
			return fmt.Errorf("sandbox %s: %w (conditions %s; Ready message %q)", key(sb), err,
				builder.FormatConditions(got.Status.Conditions), readyCondition(got).Message)
		}
		return nil
	})
	return got
}

// waitPod polls the Pod until it exists and check passes, and returns it.
func waitPod(t testing.TB, k client.ObjectKey, check func(*corev1.Pod) error) *corev1.Pod {
	t.Helper()
	got := &corev1.Pod{}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, k, got); err != nil {
			return err
		}
		if check == nil {
			return nil
		}
		return check(got)
	})
	return got
}

// waitGone polls until obj is NotFound.
func waitGone(t testing.TB, obj client.Object) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		err := env.Client.Get(ctx, key(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("%T %s still exists (err %v)", obj, key(obj), err)
	})
}

// runOnNode creates sb and plays the scheduler and kubelet for its Pod: bound to a node (so the
// Pod is deleted gracefully and stays Terminating, no kubelet confirming) and Ready. It returns
// the Pod once the Sandbox is Ready.
func runOnNode(t testing.TB, ctx context.Context, sb *agentsv1beta1.Sandbox) *corev1.Pod {
	t.Helper()
	create(t, ctx, sb)
	pod := waitPod(t, key(sb), nil)
	if err := framework.BindPod(ctx, env.Client, pod, "node-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.MarkPodReady(ctx, env.Client, key(pod)); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady))
	return pod
}

// finishDeletion confirms the terminating Pod old's deletion, as its kubelet would, and waits for
// the Sandbox to be Ready on the Pod that replaces it.
func finishDeletion(t testing.TB, ctx context.Context, sb *agentsv1beta1.Sandbox, old *corev1.Pod) {
	t.Helper()
	forceDelete(t, ctx, old)
	fresh := waitPod(t, key(sb), func(p *corev1.Pod) error {
		if p.UID == old.UID {
			return fmt.Errorf("still the terminating pod")
		}
		return nil
	})
	if _, err := framework.MarkPodReady(ctx, env.Client, key(fresh)); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady))
}

// ready matches the Ready condition's status and reason.
func ready(status metav1.ConditionStatus, reason string) func(*agentsv1beta1.Sandbox) error {
	return condition(agentsv1beta1.SandboxConditionReady, status, reason)
}

func condition(t string, status metav1.ConditionStatus, reason string) func(*agentsv1beta1.Sandbox) error {
	return func(sb *agentsv1beta1.Sandbox) error {
		return builder.HasCondition(sb.Status.Conditions, t, status, reason)
	}
}

// all combines checks.
func all(checks ...func(*agentsv1beta1.Sandbox) error) func(*agentsv1beta1.Sandbox) error {
	return func(sb *agentsv1beta1.Sandbox) error {
		var errs []error
		for _, c := range checks {
			errs = append(errs, c(sb))
		}
		return errors.Join(errs...)
	}
}

// readyMessage matches the Ready condition's message exactly.
func readyMessage(msg string) func(*agentsv1beta1.Sandbox) error {
	return func(sb *agentsv1beta1.Sandbox) error {
		c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
		if c == nil || c.Message != msg {
			return fmt.Errorf("Ready message is %v, want %q", c, msg)
		}
		return nil
	}
}

// updateSandbox re-reads the Sandbox, applies mutate and updates it, retrying on conflict.
func updateSandbox(t testing.TB, ctx context.Context, sb *agentsv1beta1.Sandbox, mutate func(*agentsv1beta1.Sandbox)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, key(sb), got); err != nil {
			return err
		}
		mutate(got)
		return env.Client.Update(ctx, got)
	})
	if err != nil {
		t.Fatalf("updating sandbox %s: %v", key(sb), err)
	}
}

var touches int

// touch changes an annotation of the Sandbox that the controller ignores, to cause a pass, and
// returns the Sandbox's new resourceVersion.
func touch(t testing.TB, ctx context.Context, sb *agentsv1beta1.Sandbox) string {
	t.Helper()
	touches++
	patch := []byte(`{"metadata":{"annotations":{"test.paddock.dev/touch":"` + strconv.Itoa(touches) + `"}}}`)
	obj := sb.DeepCopy()
	if err := env.Client.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("touching sandbox %s: %v", key(sb), err)
	}
	return obj.ResourceVersion
}

// nextCompletedPass causes a pass of sb that reads the Sandbox at least as new as a touch made
// now (so the pass is not skipped for a stale cache) and returns what that pass wrote, once a
// following pass proves it complete: passes of one Sandbox never overlap.
func nextCompletedPass(t testing.TB, ctx context.Context, sb *agentsv1beta1.Sandbox) []string {
	t.Helper()
	n := len(ops.Passes(sb))
	pass := waitPassReading(t, sb, n, touch(t, ctx, sb))
	touch(t, ctx, sb)
	waitPasses(t, sb, pass+2)
	return ops.Passes(sb)[pass]
}

// waitPassReading waits for a pass of sb, the from-th or a later one, that read the Sandbox at
// version or newer, and returns its index.
func waitPassReading(t testing.TB, sb *agentsv1beta1.Sandbox, from int, version string) int {
	t.Helper()
	var pass int
	framework.Eventually(t, func(context.Context) error {
		for i, read := range ops.ReadVersions(sb)[from:] {
			if c, err := resourceversion.CompareResourceVersion(read, version); err == nil && c >= 0 {
				pass = from + i
				return nil
			}
		}
		return fmt.Errorf("no pass of %s has read version %s yet", key(sb), version)
	})
	return pass
}

// owner is the controller reference a Sandbox's children must carry.
func owner(sb *agentsv1beta1.Sandbox) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(sb, agentsv1beta1.GroupVersion.WithKind("Sandbox"))}
}

// forceDelete removes obj at once, dropping finalizers, as a kubelet confirming a deletion would.
func forceDelete(t testing.TB, ctx context.Context, obj client.Object) {
	t.Helper()
	if err := env.Client.Get(ctx, key(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return
		}
		t.Fatal(err)
	}
	if len(obj.GetFinalizers()) > 0 {
		base := obj.DeepCopyObject().(client.Object)
		obj.SetFinalizers(nil)
		if err := env.Client.Patch(ctx, obj, client.MergeFrom(base)); err != nil {
			t.Fatalf("removing finalizers of %s: %v", key(obj), err)
		}
	}
	if err := env.Client.Delete(ctx, obj, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		t.Fatalf("deleting %s: %v", key(obj), err)
	}
}

// waitPasses waits until sb has had at least n passes.
func waitPasses(t testing.TB, sb *agentsv1beta1.Sandbox, n int) {
	t.Helper()
	framework.Eventually(t, func(context.Context) error {
		if got := len(ops.Passes(sb)); got < n {
			return fmt.Errorf("%d passes of %s, waiting for %d", got, key(sb), n)
		}
		return nil
	})
}
