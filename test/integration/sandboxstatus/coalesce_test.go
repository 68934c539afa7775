package sandboxstatus

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// A new Sandbox's Pod goes pending, then scheduled, then Ready: with the window, the Sandbox's
// status is written once, when it turns Ready, carrying everything seen on the way.
func TestStartupWrittenOnceAtReady(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	ns := env.Namespace(t)
	sb := builder.MakeSandbox("starting", ns).PodLabel("app", "agent").Obj()
	framework.MustCreate(t, ctx, env.Client, sb)
	pod := waitPod(t, client.ObjectKeyFromObject(sb), func(*corev1.Pod) error { return nil })
	if _, err := framework.MarkPodScheduled(ctx, env.Client, client.ObjectKeyFromObject(pod)); err != nil {
		t.Fatal(err)
	}
	// The second pass starts only after the first, which saw the scheduled Pod, has ended,
	// status write included: passes of one Sandbox never overlap.
	passAfter(t, ctx, pod)
	passAfter(t, ctx, pod)

	got := &agentsv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 || statusWrites.get(client.ObjectKeyFromObject(sb)) != 0 {
		t.Fatalf("status written while the Sandbox was only starting up: %d writes, conditions %s",
			statusWrites.get(client.ObjectKeyFromObject(sb)), builder.FormatConditions(got.Status.Conditions))
	}

	if _, err := framework.MarkPodReady(ctx, env.Client, client.ObjectKeyFromObject(pod)); err != nil {
		t.Fatal(err)
	}
	got = waitSandbox(t, sb, func(s *agentsv1beta1.Sandbox) error {
		if !meta.IsStatusConditionTrue(s.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
			return errors.New("not Ready yet")
		}
		return nil
	})
	if !meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.SandboxConditionPodScheduled) || len(got.Status.PodIPs) == 0 {
		t.Errorf("the Ready write lacks what was seen on the way: conditions %s, podIPs %v",
			builder.FormatConditions(got.Status.Conditions), got.Status.PodIPs)
	}
	// The API server shows the Ready write a moment before the client that sent it returns and
	// counts it: wait for the count, then let two more passes end so that any extra write is counted.
	key := client.ObjectKeyFromObject(sb)
	framework.Eventually(t, func(context.Context) error {
		if statusWrites.get(key) == 0 {
			return errors.New("the Ready write is not counted yet")
		}
		return nil
	})
	passAfter(t, ctx, pod)
	passAfter(t, ctx, pod)
	if n := statusWrites.get(key); n != 1 {
		t.Errorf("%d status writes for the whole start-up, want 1", n)
	}
}

// News a user acts on is never held: a Pod that fails while the Sandbox starts is reported at
// once, whatever the window.
func TestFailureNotHeld(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	ns := env.Namespace(t)
	sb := builder.MakeSandbox("failing", ns).Obj()
	framework.MustCreate(t, ctx, env.Client, sb)
	pod := waitPod(t, client.ObjectKeyFromObject(sb), func(*corev1.Pod) error { return nil })
	if _, err := framework.SetPodPhase(ctx, env.Client, client.ObjectKeyFromObject(pod), corev1.PodFailed); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, func(s *agentsv1beta1.Sandbox) error {
		if !meta.IsStatusConditionTrue(s.Status.Conditions, agentsv1beta1.SandboxConditionFinished) {
			return fmt.Errorf("no Finished=True yet; conditions %s", builder.FormatConditions(s.Status.Conditions))
		}
		return nil
	})
}

// passAfter makes sure a reconcile pass has seen pod as it is now: it strips a label the
// controller owns on the Pod and waits until the controller has put it back.
func passAfter(t *testing.T, ctx context.Context, pod *corev1.Pod) {
	t.Helper()
	fresh := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), fresh); err != nil {
		t.Fatal(err)
	}
	base := fresh.DeepCopy()
	delete(fresh.Labels, "app")
	if err := env.Client.Patch(ctx, fresh, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	waitPod(t, client.ObjectKeyFromObject(pod), func(p *corev1.Pod) error {
		if p.Labels["app"] != "agent" {
			return errors.New("template label app not restored yet")
		}
		return nil
	})
}

func waitPod(t *testing.T, key client.ObjectKey, check func(*corev1.Pod) error) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, key, pod); err != nil {
			return err
		}
		return check(pod)
	})
	return pod
}

func waitSandbox(t *testing.T, sb *agentsv1beta1.Sandbox, check func(*agentsv1beta1.Sandbox) error) *agentsv1beta1.Sandbox {
	t.Helper()
	got := &agentsv1beta1.Sandbox{}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		return check(got)
	})
	return got
}
