package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// expire moves the reconciler's clock past sb's shutdownTime and wakes the Sandbox up.
func expire(t *testing.T, sb *agentsv1beta1.Sandbox) {
	t.Helper()
	clock.SetTime(sb.Spec.ShutdownTime.Add(time.Minute))
	touch(t, framework.Context(t, time.Minute), sb)
}

// expiryPasses finds, among passes, the one that marked the Sandbox expired and the one that
// tore it down, and checks that they are distinct and in that order.
func checkTwoPassExpiry(t *testing.T, passes [][]string, teardown ...string) {
	t.Helper()
	mark := slices.IndexFunc(passes, func(p []string) bool { return slices.Contains(p, "status Ready=SandboxExpired") })
	if mark < 0 {
		t.Fatalf("no pass wrote Ready=SandboxExpired: %v", passes)
	}
	for _, op := range passes[mark] {
		if strings.HasPrefix(op, "delete") {
			t.Errorf("the pass that marked expiry also deleted: %v", passes[mark])
		}
	}
	for _, want := range teardown {
		i := slices.IndexFunc(passes, func(p []string) bool { return slices.Contains(p, want) })
		if i <= mark {
			t.Errorf("%q happened in pass %d, want after the marking pass %d: %v", want, i, mark, passes)
		}
	}
}

// Retain: the Pod and Service go, the PVC and the Sandbox stay, status keeps only conditions.
func TestExpiryRetain(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("ttl", ns).Service(true).VolumeClaim("data", "1Gi").ShutdownAt(clock.Now().Add(time.Hour)).Obj()
	pod := runOnNode(t, ctx, sb)
	n := len(ops.Passes(sb))

	expire(t, sb)
	got := waitSandbox(t, sb, all(ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonExpired), readyMessage("Sandbox has expired"),
		func(s *agentsv1beta1.Sandbox) error {
			if want := (agentsv1beta1.SandboxStatus{Conditions: s.Status.Conditions}); !equalStatus(want, s.Status) {
				return fmt.Errorf("status not reset to conditions only: %+v", s.Status)
			}
			return nil
		}))
	if err := builder.LacksCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionPodScheduled); err != nil {
		t.Error(err)
	}
	if err := builder.HasCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionSuspended, metav1.ConditionFalse, ""); err != nil {
		t.Error(err)
	}
	// The bound Pod is deleted gracefully; without a kubelet it stays Terminating.
	waitPod(t, key(pod), func(p *corev1.Pod) error {
		if p.DeletionTimestamp.IsZero() {
			return fmt.Errorf("pod not being deleted")
		}
		return nil
	})
	waitGone(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: sb.Name, Namespace: ns}})
	checkTwoPassExpiry(t, ops.Passes(sb)[n:], "delete Pod", "delete Service")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-ttl"}, &corev1.PersistentVolumeClaim{}); err != nil {
		t.Errorf("PVC not kept on expiry with Retain: %v", err)
	}

	// Nothing is recreated on later passes.
	forceDelete(t, ctx, pod)
	pass := nextCompletedPass(t, ctx, sb)
	if slices.Contains(pass, "create Pod") {
		t.Errorf("an expired sandbox recreated its pod: %v", pass)
	}

	// Moving shutdownTime into the future brings it back.
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.ShutdownTime = &metav1.Time{Time: clock.Now().Add(time.Hour)} })
	waitPod(t, key(sb), nil)
	waitSandbox(t, sb, ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady))
}

// Delete: the Sandbox itself is deleted after its Pod and Service.
func TestExpiryDelete(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("gone", ns).Service(true).ShutdownAt(clock.Now().Add(time.Hour)).
		ShutdownPolicy(agentsv1beta1.ShutdownPolicyDelete).Obj()
	create(t, ctx, sb)
	pod := waitPod(t, key(sb), nil)
	waitSandbox(t, sb, hasService)
	n := len(ops.Passes(sb))
	expire(t, sb)
	waitGone(t, sb.DeepCopy())
	waitGone(t, pod)
	// The recorder logs a delete after the API server answered it, so the Sandbox can be seen
	// gone before its delete is in the log.
	framework.Eventually(t, func(context.Context) error {
		for _, p := range ops.Passes(sb)[n:] {
			if slices.Contains(p, "delete Sandbox") {
				return nil
			}
		}
		return errors.New("the Sandbox's delete is not recorded yet")
	})
	checkTwoPassExpiry(t, ops.Passes(sb)[n:], "delete Pod", "delete Service", "delete Sandbox")
}

// The Finished condition of a completed Pod survives the expiry teardown.
func TestExpiryKeepsFinished(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("done", ns).ShutdownAt(clock.Now().Add(time.Hour)).Obj()
	create(t, ctx, sb)
	pod := waitPod(t, key(sb), nil)
	if _, err := framework.SetPodPhase(ctx, env.Client, key(pod), corev1.PodSucceeded); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, condition(agentsv1beta1.SandboxConditionFinished, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodSucceeded))
	expire(t, sb)
	waitGone(t, pod)
	waitSandbox(t, sb, all(ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonExpired),
		condition(agentsv1beta1.SandboxConditionFinished, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodSucceeded)))
}

// A Sandbox created already expired never gets a Pod.
func TestCreatedExpired(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("late", ns).ShutdownAt(clock.Now().Add(-time.Minute)).Obj()
	create(t, ctx, sb)
	waitSandbox(t, sb, ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonExpired))
	nextCompletedPass(t, ctx, sb)
	for _, pass := range ops.Passes(sb) {
		if slices.Contains(pass, "create Pod") {
			t.Errorf("an expired sandbox created a pod: %v", pass)
		}
	}
}
