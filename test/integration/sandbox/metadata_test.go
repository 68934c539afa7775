package sandbox

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/naming"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

func markScheduled(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	return framework.MarkPodScheduled(ctx, env.Client, key(pod))
}

func bindPod(ctx context.Context, pod *corev1.Pod, node string) error {
	return framework.BindPod(ctx, env.Client, pod, node)
}

// podMetadata waits until the Pod's labels and annotations are exactly the wanted ones.
func podMetadata(t *testing.T, sb *agentsv1beta1.Sandbox, labels, annotations map[string]string) {
	t.Helper()
	waitPod(t, key(sb), func(p *corev1.Pod) error {
		if diff := cmp.Diff(labels, p.Labels); diff != "" {
			return fmt.Errorf("pod labels (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(annotations, p.Annotations); diff != "" {
			return fmt.Errorf("pod annotations (-want +got):\n%s", diff)
		}
		return nil
	})
}

// Template labels and annotations follow edits, removed keys are pruned, keys set by others are
// kept, and reserved keys never get through.
func TestPodMetadataPropagation(t *testing.T) {
	ctx, ns := start(t)
	hash := naming.NameHash("meta")
	sb := builder.MakeSandbox("meta", ns).PodLabel("a", "1").PodLabel("b", "2").PodAnnotation("n", "1").Obj()
	create(t, ctx, sb)
	podMetadata(t, sb,
		map[string]string{"a": "1", "b": "2", agentsv1beta1.SandboxNameHashLabel: hash},
		map[string]string{"n": "1", agentsv1beta1.PropagatedLabelsAnnotation: "a,b", agentsv1beta1.PropagatedAnnotationsAnnotation: "n"})

	// Someone else labels the Pod; an older controller had let a reserved key through.
	pod := waitPod(t, key(sb), nil)
	base := pod.DeepCopy()
	pod.Labels["ext"] = "keep"
	pod.Labels[agentsv1beta1.LaunchTypeLabel] = "warm"
	pod.Annotations[agentsv1beta1.PropagatedLabelsAnnotation] = "a,b," + agentsv1beta1.LaunchTypeLabel
	if err := env.Client.Patch(ctx, pod, mergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) {
		s.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{"a": "3", "c": "4", agentsv1beta1.LaunchTypeLabel: "cold",
			agentsv1beta1.SandboxNameHashLabel: "forged"}
		s.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{"m": "2", agentsv1beta1.ClaimNameAnnotation: "forged"}
	})
	podMetadata(t, sb,
		map[string]string{"a": "3", "c": "4", "ext": "keep", agentsv1beta1.SandboxNameHashLabel: hash},
		map[string]string{"m": "2", agentsv1beta1.PropagatedLabelsAnnotation: "a,c", agentsv1beta1.PropagatedAnnotationsAnnotation: "m"})

	// A relabelled tracking label is put back.
	pod = waitPod(t, key(sb), nil)
	base = pod.DeepCopy()
	pod.Labels[agentsv1beta1.SandboxNameHashLabel] = "tampered"
	if err := env.Client.Patch(ctx, pod, mergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	podMetadata(t, sb,
		map[string]string{"a": "3", "c": "4", "ext": "keep", agentsv1beta1.SandboxNameHashLabel: hash},
		map[string]string{"m": "2", agentsv1beta1.PropagatedLabelsAnnotation: "a,c", agentsv1beta1.PropagatedAnnotationsAnnotation: "m"})
}

// Extension labels follow the Sandbox's controller, and the claim's identity reaches the Pod.
func TestExtensionLabelsAndClaimIdentity(t *testing.T) {
	ctx, ns := start(t)
	pool := builder.MakeWarmPool("pool", ns, "tpl").Obj()
	claim := builder.MakeClaim("claim", ns, "pool").Obj()
	create(t, ctx, pool)
	create(t, ctx, claim)
	poolKind := extensionsv1beta1.GroupVersion.WithKind("SandboxWarmPool")
	claimKind := extensionsv1beta1.GroupVersion.WithKind("SandboxClaim")
	hash := naming.NameHash("member")
	sb := builder.MakeSandbox("member", ns).
		Label(agentsv1beta1.WarmPoolSandboxLabel, naming.NameHash("pool")).
		Label(agentsv1beta1.SandboxTemplateRefHashLabel, naming.NameHash("tpl")).
		Label(agentsv1beta1.CreatedByLabel, "controller").
		ControlledBy(pool, poolKind).Obj()
	create(t, ctx, sb)
	podMetadata(t, sb, map[string]string{
		agentsv1beta1.SandboxNameHashLabel:        hash,
		agentsv1beta1.WarmPoolSandboxLabel:        naming.NameHash("pool"),
		agentsv1beta1.SandboxTemplateRefHashLabel: naming.NameHash("tpl"),
		agentsv1beta1.CreatedByLabel:              "controller",
	}, nil)

	// The claim adopts the Sandbox, as the claim controller does: ownerRef swapped, pool label gone.
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) {
		s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, claimKind)}
		delete(s.Labels, agentsv1beta1.WarmPoolSandboxLabel)
	})
	podMetadata(t, sb, map[string]string{
		agentsv1beta1.SandboxNameHashLabel:        hash,
		agentsv1beta1.SandboxTemplateRefHashLabel: naming.NameHash("tpl"),
		agentsv1beta1.CreatedByLabel:              "controller",
		agentsv1beta1.ClaimUIDLabel:               string(claim.UID),
	}, map[string]string{agentsv1beta1.ClaimNameAnnotation: "claim"})

	// Released: no controller, no claim identity, no template label.
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.OwnerReferences = nil })
	podMetadata(t, sb, map[string]string{
		agentsv1beta1.SandboxNameHashLabel: hash,
		agentsv1beta1.CreatedByLabel:       "controller",
	}, nil)
}

// A pass that finds nothing changed writes nothing at all, status included.
func TestNoWriteWhenNothingChanged(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("still", ns).Service(true).VolumeClaim("data", "1Gi").PodLabel("a", "1").Obj()
	create(t, ctx, sb)
	pod := waitPod(t, key(sb), nil)
	if _, err := markReady(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady))
	for i := 0; i < 3; i++ {
		if pass := nextCompletedPass(t, ctx, sb); len(pass) != 0 {
			t.Errorf("pass over an unchanged sandbox wrote %v", pass)
		}
	}
}

// A Pod's node alone is not worth a status write; it is written with the Ready transition.
func TestNodeNameRidesWithReady(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("placed", ns).PodLabel("a", "1").Obj()
	create(t, ctx, sb)
	pod := waitPod(t, key(sb), nil)
	if _, err := markScheduled(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, condition(agentsv1beta1.SandboxConditionPodScheduled, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodScheduled))
	n := len(ops.Passes(sb))
	if err := bindPod(ctx, pod, "node-a"); err != nil {
		t.Fatal(err)
	}
	// Make the controller act on the bound Pod, so we know a pass has seen its node.
	pod = waitPod(t, key(pod), nil)
	base := pod.DeepCopy()
	delete(pod.Labels, "a")
	if err := env.Client.Patch(ctx, pod, mergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	waitPod(t, key(pod), func(p *corev1.Pod) error {
		if p.Labels["a"] != "1" {
			return fmt.Errorf("label a not restored yet")
		}
		return nil
	})
	nextCompletedPass(t, ctx, sb)
	for _, pass := range ops.Passes(sb)[n:] {
		for _, op := range pass {
			if op != "patch Pod" {
				t.Errorf("unexpected write %q after binding: only the pod relabel was due", op)
			}
		}
	}
	if got := waitSandbox(t, sb, func(*agentsv1beta1.Sandbox) error { return nil }); got.Status.NodeName != "" {
		t.Errorf("nodeName written alone: %q", got.Status.NodeName)
	}

	if _, err := markReady(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, all(ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady), func(s *agentsv1beta1.Sandbox) error {
		if s.Status.NodeName != "node-a" {
			return fmt.Errorf("nodeName = %q, want node-a", s.Status.NodeName)
		}
		return nil
	}))
}

func markReady(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	return framework.MarkPodReady(ctx, env.Client, key(pod))
}
