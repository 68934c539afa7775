package sandbox

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// Suspending deletes the owned Pod and keeps PVCs and Service; resuming recreates the Pod on the
// same claims.
func TestSuspendAndResume(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("nap", ns).VolumeClaim("home", "1Gi").Service(true).Obj()
	create(t, ctx, sb)
	pod := waitPod(t, key(sb), nil)
	if _, err := framework.MarkPodReady(ctx, env.Client, key(pod)); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady))
	pvc := &corev1.PersistentVolumeClaim{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "home-nap"}, pvc); err != nil {
		t.Fatal(err)
	}

	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	waitGone(t, pod.DeepCopy())
	got := waitSandbox(t, sb, all(
		condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodTerminated),
		ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonSuspended), readyMessage("Sandbox is suspended"),
		podIPs(), hasService,
		func(s *agentsv1beta1.Sandbox) error {
			if _, ok := s.Annotations[agentsv1beta1.PodNameAnnotation]; ok {
				return fmt.Errorf("pod-name annotation still set while suspended")
			}
			return builder.LacksCondition(s.Status.Conditions, agentsv1beta1.SandboxConditionPodScheduled)
		}))
	if got.Status.LabelSelector == "" {
		t.Errorf("selector cleared on suspension; it stays once a pod was seen")
	}
	after := &corev1.PersistentVolumeClaim{}
	if err := env.Client.Get(ctx, key(pvc), after); err != nil || after.UID != pvc.UID {
		t.Errorf("PVC not kept across suspension: %v (uid %s→%s)", err, pvc.UID, after.UID)
	}
	if err := env.Client.Get(ctx, key(sb), &corev1.Service{}); err != nil {
		t.Errorf("service not kept across suspension: %v", err)
	}
	// Nothing comes back while suspended.
	nextCompletedPass(t, ctx, sb)
	if err := env.Client.Get(ctx, key(pod), &corev1.Pod{}); err == nil {
		t.Errorf("a pod exists while suspended")
	}

	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning })
	resumed := waitPod(t, key(sb), nil)
	if resumed.UID == pod.UID {
		t.Fatalf("resumed pod is the old one")
	}
	var claims []string
	for _, v := range resumed.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, v.PersistentVolumeClaim.ClaimName)
		}
	}
	if len(claims) != 1 || claims[0] != "home-nap" {
		t.Errorf("resumed pod mounts claims %v, want [home-nap]", claims)
	}
	waitSandbox(t, sb, condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionFalse, agentsv1beta1.SandboxReasonNotSuspended))
}

// While the owned Pod terminates, the Sandbox reports suspending; then suspended.
func TestSuspendWaitsForTerminatingPod(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("drain", ns).Obj()
	pod := runOnNode(t, ctx, sb)
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	// A bound Pod is deleted gracefully and, without a kubelet, stays Terminating.
	waitSandbox(t, sb, all(
		condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionFalse, agentsv1beta1.SandboxReasonPodTerminating),
		ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonSuspended), readyMessage("Sandbox is suspending")))
	forceDelete(t, ctx, pod)
	waitSandbox(t, sb, condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodTerminated))
}

// A Sandbox resumed while the Pod of its suspension still terminates is not Ready on that Pod,
// which still reports Ready but is about to stop (its processes get SIGTERM): it waits for the
// replacement. Reporting the draining Pod as Ready sent a woken sandbox's first command to the
// dying Pod.
func TestResumeWhileThePodDrainsWaitsForTheNewPod(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("wake", ns).Obj()
	old := runOnNode(t, ctx, sb)
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	// Bound, the Pod is deleted gracefully and, without a kubelet, stays Terminating and Ready.
	waitSandbox(t, sb, condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionFalse, agentsv1beta1.SandboxReasonPodTerminating))

	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning })
	draining := all(ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady),
		readyMessage("Pod is terminating; a new Pod replaces it once it is gone"))
	waitSandbox(t, sb, draining)
	nextCompletedPass(t, ctx, sb)
	got := &agentsv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, key(sb), got); err != nil {
		t.Fatal(err)
	}
	if err := draining(got); err != nil {
		t.Fatalf("after another pass: %v", err)
	}

	finishDeletion(t, ctx, sb, old)
}

// A Pod the Sandbox does not control is never deleted on suspension.
func TestSuspendLeavesForeignPod(t *testing.T) {
	ctx, ns := start(t)
	cm := builder.ConfigMapOwner("owner", ns)
	create(t, ctx, cm)
	pod := builder.MakePod("held", ns).ControlledBy(cm, builder.ConfigMapKind).Obj()
	create(t, ctx, pod)
	sb := builder.MakeSandbox("held", ns).Suspended().Obj()
	create(t, ctx, sb)
	waitSandbox(t, sb, all(
		condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionFalse, agentsv1beta1.SandboxReasonPodNotOwned),
		ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonSuspended), podIPs()))
	nextCompletedPass(t, ctx, sb)
	if got := waitPod(t, key(pod), nil); !got.DeletionTimestamp.IsZero() {
		t.Errorf("foreign pod was deleted on suspension")
	}
}

// A Sandbox created Suspended never gets a Pod.
func TestCreatedSuspended(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("cold", ns).Suspended().Obj()
	create(t, ctx, sb)
	waitSandbox(t, sb, condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodTerminated))
	nextCompletedPass(t, ctx, sb)
	if err := env.Client.Get(ctx, key(sb), &corev1.Pod{}); err == nil {
		t.Errorf("a suspended sandbox got a pod")
	}
}
