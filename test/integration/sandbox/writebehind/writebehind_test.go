package writebehind

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	sandboxctrl "github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// stageLabel is the template label the tests edit.
const stageLabel = "test.paddock.dev/stage"

// Edits made within the window reach the Pod together, in one patch, once the window has
// passed; until then the controller has seen them and held the patch back.
func TestEditsReachThePodInOnePatchAfterTheWindow(t *testing.T) {
	ctx, ns := framework.Context(t, 3*time.Minute), env.Namespace(t)
	sb := builder.MakeSandbox("coalesce", ns).PodLabel(stageLabel, "1").Obj()
	framework.MustCreate(t, ctx, env.Client, sb)
	waitStage(t, sb, "1") // a create is never held back

	setStage(t, ctx, sb, "2")
	setStage(t, ctx, sb, "3")
	expectStage(t, ctx, sb, "1")
	if n := log.patches(key(sb), "metadata"); n != 0 {
		t.Fatalf("pod got %d metadata patches inside the window, want 0", n)
	}

	clock.Step(sandboxctrl.MaxWriteBehindWindow)
	waitStage(t, sb, "3")
	settle(t, ctx, sb)
	if n := log.patches(key(sb), "metadata"); n != 1 {
		t.Errorf("pod got %d metadata patches for two edits, want 1", n)
	}
}

// Adoption is never held back: an orphaned Pod is adopted at once, and the adoption carries the
// metadata patch that was being held back.
func TestAdoptionIsNeverHeldBack(t *testing.T) {
	ctx, ns := framework.Context(t, 3*time.Minute), env.Namespace(t)
	framework.MustCreate(t, ctx, env.Client, builder.MakePod("adopt", ns).Label(agentsv1beta1.AdoptableLabel, "true").Obj())
	sb := builder.MakeSandbox("adopt", ns).PodLabel(stageLabel, "1").Obj()
	framework.MustCreate(t, ctx, env.Client, sb)
	waitAdopted(t, sb, "1")

	setStage(t, ctx, sb, "2")
	expectStage(t, ctx, sb, "1")

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "adopt", Namespace: ns}}
	if err := env.Client.Patch(ctx, pod, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"ownerReferences":null}}`))); err != nil {
		t.Fatalf("orphaning pod: %v", err)
	}
	waitAdopted(t, sb, "2") // the clock has not moved: only the adoption can have done it
	// The Pod shows the adoption as soon as the API server applied it, a moment before the pass
	// that sent it records it; once a later pass has finished, that one has too.
	settle(t, ctx, sb)
	if got := [2]int{log.patches(key(sb), "adoption"), log.patches(key(sb), "metadata")}; got != [2]int{2, 0} {
		t.Errorf("pod got %d adoptions and %d metadata patches, want 2 and 0", got[0], got[1])
	}
}

// A pass that finds nothing pending drops the Sandbox's clock: an edit reverted inside the window
// costs no write, and the next edit starts a fresh window instead of inheriting the old deadline.
func TestRevertedEditCostsNothingAndRestartsTheClock(t *testing.T) {
	ctx, ns := framework.Context(t, 3*time.Minute), env.Namespace(t)
	sb := builder.MakeSandbox("revert", ns).PodLabel(stageLabel, "1").Obj()
	framework.MustCreate(t, ctx, env.Client, sb)
	waitStage(t, sb, "1")

	setStage(t, ctx, sb, "2")
	setStage(t, ctx, sb, "1")
	clock.Step(sandboxctrl.MaxWriteBehindWindow) // the first edit's deadline is now past

	setStage(t, ctx, sb, "3")
	expectStage(t, ctx, sb, "1")
	if n := log.patches(key(sb), "metadata"); n != 0 {
		t.Fatalf("pod got %d metadata patches, want 0: the reverted edit's clock must not carry over", n)
	}

	clock.Step(sandboxctrl.MaxWriteBehindWindow)
	waitStage(t, sb, "3")
	settle(t, ctx, sb)
	if n := log.patches(key(sb), "metadata"); n != 1 {
		t.Errorf("pod got %d metadata patches, want 1", n)
	}
}

func key(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }

// setStage sets the template's stage label and waits until a pass that saw the edit completed.
func setStage(t *testing.T, ctx context.Context, sb *agentsv1beta1.Sandbox, stage string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"podTemplate":{"metadata":{"labels":{%q:%q}}}}}`, stageLabel, stage)
	if err := env.Client.Patch(ctx, sb.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatalf("setting stage %s on sandbox %s: %v", stage, key(sb), err)
	}
	settle(t, ctx, sb)
}

var touches int

// settle returns once the controller has finished a pass that read the Sandbox as it is now.
// Passes of one Sandbox never overlap and the cache only moves forward, so a pass that starts on
// a later touch proves the passes on earlier versions complete; three touches leave room for a
// pass skipped for a stale cache.
func settle(t *testing.T, ctx context.Context, sb *agentsv1beta1.Sandbox) {
	t.Helper()
	for range 3 {
		touches++
		obj := sb.DeepCopy()
		patch := `{"metadata":{"annotations":{"test.paddock.dev/touch":"` + strconv.Itoa(touches) + `"}}}`
		if err := env.Client.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatalf("touching sandbox %s: %v", key(sb), err)
		}
		framework.Eventually(t, func(context.Context) error {
			for _, read := range log.passes(key(sb)) {
				if c, err := resourceversion.CompareResourceVersion(read, obj.ResourceVersion); err == nil && c >= 0 {
					return nil
				}
			}
			return fmt.Errorf("no pass of sandbox %s has read version %s yet", key(sb), obj.ResourceVersion)
		})
	}
}

// expectStage fails the test unless the Pod's stage label is stage now.
func expectStage(t *testing.T, ctx context.Context, sb *agentsv1beta1.Sandbox, stage string) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, key(sb), pod); err != nil {
		t.Fatal(err)
	}
	if got := pod.Labels[stageLabel]; got != stage {
		t.Fatalf("pod %s has stage %q before the window passed, want %q", key(sb), got, stage)
	}
}

// waitStage waits until the Sandbox's Pod carries the stage label.
func waitStage(t *testing.T, sb *agentsv1beta1.Sandbox, stage string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, key(sb), pod); err != nil {
			return err
		}
		if got := pod.Labels[stageLabel]; got != stage {
			return fmt.Errorf("pod %s has stage %q, want %q", key(sb), got, stage)
		}
		return nil
	})
}

// waitAdopted waits until the Sandbox controls its Pod and the Pod carries the stage label.
func waitAdopted(t *testing.T, sb *agentsv1beta1.Sandbox, stage string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		live := &agentsv1beta1.Sandbox{}
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, key(sb), live); err != nil {
			return err
		}
		if err := env.Client.Get(ctx, key(sb), pod); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != live.UID {
			return fmt.Errorf("pod %s is not controlled by sandbox %s (controller %v)", key(sb), key(sb), ref)
		}
		if got := pod.Labels[stageLabel]; got != stage {
			return fmt.Errorf("pod %s has stage %q, want %q", key(sb), got, stage)
		}
		return nil
	})
}
