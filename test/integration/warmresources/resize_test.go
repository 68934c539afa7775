package warmresources

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/podresize"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// sized is a Guaranteed container's resources: requests equal to limits.
func sized(cpu, memory string) corev1.ResourceRequirements {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// setUp makes a template of 500m/256Mi and a pool of one whose member waits at 10m/32Mi and whose
// claims may ask for up to 2 CPUs and 1Gi, starts the member's Pod as the kubelet would and
// returns the member's name once it is Ready.
func setUp(t *testing.T, ctx context.Context, ns string) string {
	t.Helper()
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Resources(sized("500m", "256Mi")).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(1).
		Annotation(extensionsv1beta1.IdleCPUAnnotation, "10m").Annotation(extensionsv1beta1.IdleMemoryAnnotation, "32Mi").
		Annotation(extensionsv1beta1.ClaimCPUMaxAnnotation, "2").Annotation(extensionsv1beta1.ClaimMemoryMaxAnnotation, "1Gi").Obj())
	var member string
	framework.Eventually(t, func(ctx context.Context) error {
		var list agentsv1beta1.SandboxList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{agentsv1beta1.WarmPoolSandboxLabel}); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("no member yet")
		}
		member = list.Items[0].Name
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: member}, pod); err != nil {
			return err
		}
		if got := pod.Spec.Containers[0].Resources; !podresize.Equal(got, sized("10m", "32Mi")) {
			return fmt.Errorf("member Pod waits with %v, want 10m/32Mi", got)
		}
		_, err := runContainers(ctx, types.NamespacedName{Namespace: ns, Name: member})
		return err
	})
	waitSandboxReady(t, ns, member)
	return member
}

// runContainers plays the kubelet starting the Pod: Running, Ready, an IP, and every container
// running with the resources its spec asks for.
func runContainers(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	if _, err := framework.MarkPodReady(ctx, env.Client, key); err != nil {
		return nil, err
	}
	return applyResources(ctx, key)
}

// applyResources plays the kubelet once a resize is actuated: the resize conditions go and each
// container's status reports the resources of its spec.
func applyResources(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	return framework.UpdatePodStatus(ctx, env.Client, key, func(p *corev1.Pod) {
		p.Status.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Ready: true, Started: new(true),
				State:     corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
				Resources: c.Resources.DeepCopy(),
			})
		}
		var kept []corev1.PodCondition
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodResizePending && c.Type != corev1.PodResizeInProgress {
				kept = append(kept, c)
			}
		}
		p.Status.Conditions = kept
	})
}

// refuseResize plays a kubelet that cannot fit the resize: PodResizePending with reason.
func refuseResize(ctx context.Context, key types.NamespacedName, reason, message string) error {
	_, err := framework.UpdatePodStatus(ctx, env.Client, key, func(p *corev1.Pod) {
		framework.SetPodCondition(p, corev1.PodResizePending, corev1.ConditionTrue, reason)
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodResizePending {
				p.Status.Conditions[i].Message = message
			}
		}
	})
	return err
}

// waitResizeSent waits for the member's Pod to carry want in its spec, the resize subresource's
// doing, and returns it.
func waitResizeSent(t *testing.T, key types.NamespacedName, uid types.UID, want corev1.ResourceRequirements) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, key, pod); err != nil {
			return err
		}
		if pod.UID != uid {
			return fmt.Errorf("pod %s was replaced (UID %s, was %s)", key, pod.UID, uid)
		}
		if got := pod.Spec.Containers[0].Resources; !podresize.Equal(got, want) {
			return fmt.Errorf("pod %s asks for %v, want %v", key, got, want)
		}
		return nil
	})
}

// waitSandboxReady waits for the Sandbox to be Ready.
func waitSandboxReady(t *testing.T, ns, name string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		sb := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sb); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
			return fmt.Errorf("Sandbox %s is not Ready: %s", name, builder.FormatConditions(sb.Status.Conditions))
		}
		return nil
	})
}

// waitClaim waits for the claim's condition and returns the claim.
func waitClaim(t *testing.T, ns, name, condType string, status metav1.ConditionStatus, reason string) *extensionsv1beta1.SandboxClaim {
	t.Helper()
	c := &extensionsv1beta1.SandboxClaim{}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		return builder.HasCondition(c.Status.Conditions, condType, status, reason)
	})
	return c
}

// TestClaimResizesItsMemberInPlace: a claim choosing 1 CPU and 512Mi takes the member that
// waited at 10m/32Mi, the member's Pod (the same Pod) is resized to the claim's resources, and the
// claim is Ready only once the Pod's status reports them; without resources of its own a claim
// gets the template's.
func TestClaimResizesItsMemberInPlace(t *testing.T) {
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	member := setUp(t, ctx, ns)
	key := types.NamespacedName{Namespace: ns, Name: member}
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, key, pod); err != nil {
		t.Fatal(err)
	}

	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("big", ns, "pool").
		Annotation(extensionsv1beta1.CPUAnnotation, "1").Annotation(extensionsv1beta1.MemoryAnnotation, "512Mi").Obj())
	waitResizeSent(t, key, pod.UID, sized("1", "512Mi"))
	c := waitClaim(t, ns, "big", extensionsv1beta1.ClaimConditionResized, metav1.ConditionFalse, agentsv1beta1.SandboxReasonResizeInProgress)
	if c.Status.Sandbox.Name != member {
		t.Fatalf("claim bound to %q, want the member %q", c.Status.Sandbox.Name, member)
	}
	if err := builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionReady, metav1.ConditionFalse, agentsv1beta1.SandboxReasonResizeInProgress); err != nil {
		t.Errorf("claim Ready before its Sandbox was resized: %v", err)
	}

	if _, err := applyResources(ctx, key); err != nil {
		t.Fatal(err)
	}
	waitClaim(t, ns, "big", extensionsv1beta1.ClaimConditionReady, metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady)
	waitClaim(t, ns, "big", extensionsv1beta1.ClaimConditionResized, metav1.ConditionTrue, agentsv1beta1.SandboxReasonResized)
	sb := &agentsv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, key, sb); err != nil {
		t.Fatal(err)
	}
	if got := sb.Spec.PodTemplate.Spec.Containers[0].Resources; !podresize.Equal(got, sized("1", "512Mi")) {
		t.Errorf("Sandbox spec.podTemplate asks for %v, want the claim's 1/512Mi (a later Pod must get them too)", got)
	}

	// The pool refills; a claim without resources gets the template's 500m/256Mi.
	var next string
	framework.Eventually(t, func(ctx context.Context) error {
		var list agentsv1beta1.SandboxList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{agentsv1beta1.WarmPoolSandboxLabel}); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("pool not refilled yet")
		}
		next = list.Items[0].Name
		_, err := runContainers(ctx, types.NamespacedName{Namespace: ns, Name: next})
		return err
	})
	waitSandboxReady(t, ns, next)
	nextKey := types.NamespacedName{Namespace: ns, Name: next}
	if err := env.Client.Get(ctx, nextKey, pod); err != nil {
		t.Fatal(err)
	}
	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("plain", ns, "pool").Obj())
	waitResizeSent(t, nextKey, pod.UID, sized("500m", "256Mi"))
	if _, err := applyResources(ctx, nextKey); err != nil {
		t.Fatal(err)
	}
	c = waitClaim(t, ns, "plain", extensionsv1beta1.ClaimConditionReady, metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady)
	if c.Status.Sandbox.Name != next {
		t.Errorf("claim bound to %q, want the member %q", c.Status.Sandbox.Name, next)
	}
}

// TestInfeasibleResizeIsServedCold: a resize the kubelet reports Infeasible is the claim's
// Resized condition, naming the kubelet's reason; the warm Sandbox is discarded and a cold one,
// with the claim's resources, takes its place.
func TestInfeasibleResizeIsServedCold(t *testing.T) {
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	member := setUp(t, ctx, ns)
	key := types.NamespacedName{Namespace: ns, Name: member}
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, key, pod); err != nil {
		t.Fatal(err)
	}
	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("big", ns, "pool").Annotation(extensionsv1beta1.CPUAnnotation, "2").Obj())
	waitResizeSent(t, key, pod.UID, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	})
	const kubelet = "Node didn't have enough capacity: cpu, requested: 2000, capacity: 1000"
	if err := refuseResize(ctx, key, corev1.PodReasonInfeasible, kubelet); err != nil {
		t.Fatal(err)
	}
	c := waitClaim(t, ns, "big", extensionsv1beta1.ClaimConditionResized, metav1.ConditionFalse, extensionsv1beta1.ClaimReasonResizeFellBack)
	msg := meta(c, extensionsv1beta1.ClaimConditionResized).Message
	for _, want := range []string{"cannot fit the resize", kubelet, "starting a cold one"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Resized message %q does not say %q", msg, want)
		}
	}
	framework.Eventually(t, func(ctx context.Context) error {
		old := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, key, old); err == nil && old.DeletionTimestamp.IsZero() {
			return fmt.Errorf("warm Sandbox %s is still there", member)
		} else if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		cold := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "big"}, cold); err != nil {
			return err
		}
		if cold.Labels[agentsv1beta1.LaunchTypeLabel] != agentsv1beta1.LaunchTypeCold {
			return fmt.Errorf("Sandbox big has launch type %q", cold.Labels[agentsv1beta1.LaunchTypeLabel])
		}
		if got := cold.Spec.PodTemplate.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("2")) != 0 {
			return fmt.Errorf("cold Sandbox asks for %s CPU, want the claim's 2", got.String())
		}
		return nil
	})
	// The record of the fallback stays on the claim once it is served cold. The cold Sandbox's Pod
	// comes from the Sandbox's own reconcile, after the Sandbox exists: wait for it.
	framework.Eventually(t, func(ctx context.Context) error {
		_, err := runContainers(ctx, types.NamespacedName{Namespace: ns, Name: "big"})
		return err
	})
	c = waitClaim(t, ns, "big", extensionsv1beta1.ClaimConditionReady, metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady)
	if err := builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionResized, metav1.ConditionFalse, extensionsv1beta1.ClaimReasonResizeFellBack); err != nil {
		t.Error(err)
	}
}

// TestDeferredResizeGivesUp: a resize the node defers is shown on the claim as ResizeDeferred
// with the kubelet's message; after --sandbox-claim-resize-give-up the claim is served cold.
func TestDeferredResizeGivesUp(t *testing.T) {
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	member := setUp(t, ctx, ns)
	key := types.NamespacedName{Namespace: ns, Name: member}
	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("big", ns, "pool").Annotation(extensionsv1beta1.MemoryAnnotation, "1Gi").Obj())
	framework.Eventually(t, func(ctx context.Context) error {
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, key, pod); err != nil {
			return err
		}
		if q := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; q.Cmp(resource.MustParse("1Gi")) != 0 {
			return fmt.Errorf("resize not sent yet (memory %s)", q.String())
		}
		return nil
	})
	const kubelet = "Node didn't have enough resource: memory"
	if err := refuseResize(ctx, key, corev1.PodReasonDeferred, kubelet); err != nil {
		t.Fatal(err)
	}
	c := waitClaim(t, ns, "big", extensionsv1beta1.ClaimConditionResized, metav1.ConditionFalse, agentsv1beta1.SandboxReasonResizeDeferred)
	if msg := meta(c, extensionsv1beta1.ClaimConditionResized).Message; !strings.Contains(msg, kubelet) {
		t.Errorf("ResizeDeferred message %q lacks the kubelet's %q", msg, kubelet)
	}
	c = waitClaim(t, ns, "big", extensionsv1beta1.ClaimConditionResized, metav1.ConditionFalse, extensionsv1beta1.ClaimReasonResizeFellBack)
	if msg := meta(c, extensionsv1beta1.ClaimConditionResized).Message; !strings.Contains(msg, "gave up after "+giveUp.String()) {
		t.Errorf("fallback message %q does not say how long the claim waited", msg)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "big"}, &agentsv1beta1.Sandbox{})
	})
}

// TestControllerRefusesOutOfBounds: without the admission policy (this namespace has none) a claim
// asking for more than its pool allows gets no Sandbox and says why, naming the annotation.
func TestControllerRefusesOutOfBounds(t *testing.T) {
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)
	setUp(t, ctx, ns)
	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("huge", ns, "pool").Annotation(extensionsv1beta1.CPUAnnotation, "3").Obj())
	c := waitClaim(t, ns, "huge", extensionsv1beta1.ClaimConditionReady, metav1.ConditionFalse, extensionsv1beta1.ClaimReasonResourcesOutOfBounds)
	want := `metadata.annotations[paddock.dev/cpu]: 3 is above paddock.dev/claim-cpu-max 2 of SandboxWarmPool "pool"; ask for at most 2`
	if msg := meta(c, extensionsv1beta1.ClaimConditionReady).Message; msg != want {
		t.Errorf("Ready message = %q, want %q", msg, want)
	}
	if c.Status.Sandbox.Name != "" {
		t.Errorf("out-of-bounds claim bound to %q", c.Status.Sandbox.Name)
	}
}

func meta(c *extensionsv1beta1.SandboxClaim, condType string) metav1.Condition {
	for _, cond := range c.Status.Conditions {
		if cond.Type == condType {
			return cond
		}
	}
	return metav1.Condition{}
}
