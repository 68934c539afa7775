package snapshots

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// containerID is the containerd ID the test's node gives every Sandbox container.
const containerID = "4f1c0ffee0000000000000000000000000000000000000000000000000000000"

// baseImageDigest is the image the test's node reports the Sandbox container runs.
const baseImageDigest = "registry.test:5000/base@sha256:1111111111111111111111111111111111111111111111111111111111111111"

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func get[T client.Object](ctx context.Context, ns, name string, obj T) (T, error) {
	err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	return obj, err
}

// runSandbox creates sb and plays its node (playNode).
func runSandbox(t *testing.T, sb *agentsv1beta1.Sandbox) {
	t.Helper()
	create(t, sb)
	playNode(t, sb)
}

// playNode plays the node of an existing Sandbox: its Pod is bound, running, Ready, with the
// "main" container running under containerd. It returns once the Sandbox is Ready.
func playNode(t *testing.T, sb *agentsv1beta1.Sandbox) {
	t.Helper()
	key := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	framework.Eventually(t, func(ctx context.Context) error {
		pod, err := get(ctx, sb.Namespace, sb.Name, &corev1.Pod{})
		if err != nil {
			return err
		}
		if pod.Spec.NodeName == "" {
			if err := framework.BindPod(ctx, env.Client, pod, nodeName); err != nil {
				return err
			}
		}
		// A Pod started from a capture runs that image, which the node reports as its digest.
		imageID := baseImageDigest
		if image := pod.Spec.Containers[0].Image; strings.Contains(image, "@sha256:") {
			imageID = image
		}
		_, err = framework.UpdatePodStatus(ctx, env.Client, key, func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			framework.SetPodCondition(p, corev1.PodScheduled, corev1.ConditionTrue, "")
			framework.SetPodCondition(p, corev1.PodReady, corev1.ConditionTrue, "")
			p.Status.PodIP, p.Status.PodIPs = framework.PodIP, []corev1.PodIP{{IP: framework.PodIP}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{
				Name: "main", Ready: true, ContainerID: "containerd://" + containerID,
				Image: builder.DefaultImage, ImageID: imageID,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
			}}
		})
		if err != nil {
			return err
		}
		got, err := get(ctx, sb.Namespace, sb.Name, &agentsv1beta1.Sandbox{})
		if err != nil {
			return err
		}
		return builder.HasCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionReady, metav1.ConditionTrue, "")
	})
}

// waitSnapshot waits until the snapshot is in phase with condition cond at status and reason,
// and returns it.
func waitSnapshot(t *testing.T, ns, name string, phase snapshotsv1alpha1.SnapshotPhase, cond string, status metav1.ConditionStatus, reason string) *snapshotsv1alpha1.SandboxSnapshot {
	t.Helper()
	var snap *snapshotsv1alpha1.SandboxSnapshot
	framework.Eventually(t, func(ctx context.Context) error {
		var err error
		if snap, err = get(ctx, ns, name, &snapshotsv1alpha1.SandboxSnapshot{}); err != nil {
			return err
		}
		if snap.Status.Phase != phase {
			return fmt.Errorf("snapshot %s is in phase %q, want %q; conditions: %s", name, snap.Status.Phase, phase, builder.FormatConditions(snap.Status.Conditions))
		}
		return builder.HasCondition(snap.Status.Conditions, cond, status, reason)
	})
	return snap
}

// capturePod waits for the capture Pod of snap and returns it.
func capturePod(t *testing.T, snap *snapshotsv1alpha1.SandboxSnapshot) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, func(ctx context.Context) error {
		var err error
		pod, err = get(ctx, captureNamespace, "snapshot-"+string(snap.UID), &corev1.Pod{})
		return err
	})
	return pod
}

// finishCapture plays the capture Pod's end: phase, and res in its termination message.
func finishCapture(t *testing.T, pod *corev1.Pod, phase corev1.PodPhase, res snapshot.Result) {
	t.Helper()
	code := int32(0)
	if phase == corev1.PodFailed {
		code = 1
	}
	_, err := framework.UpdatePodStatus(framework.Context(t, framework.DefaultTimeout), env.Client, client.ObjectKeyFromObject(pod), func(p *corev1.Pod) {
		p.Status.Phase = phase
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "capture", Image: testCaptureImage,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: string(res.Encode())}},
		}}
	})
	if err != nil {
		t.Fatalf("finishing capture Pod %s: %v", pod.Name, err)
	}
}

// goneOrTerminating reports whether the Pod was deleted (a bound Pod stays Terminating here:
// no kubelet confirms the deletion).
func goneOrTerminating(ctx context.Context, ns, name string) error {
	pod, err := get(ctx, ns, name, &corev1.Pod{})
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err == nil && pod.DeletionTimestamp.IsZero() {
		return fmt.Errorf("pod %s/%s still exists and is not being deleted", ns, name)
	}
	return nil
}

// resumePod waits for a new resume Pod of snap (not finished yet), checks it resumes the source's container on the
// source's node, and plays its end with phase.
func resumePod(t *testing.T, snap *snapshotsv1alpha1.SandboxSnapshot, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, func(ctx context.Context) error {
		var err error
		pod, err = get(ctx, captureNamespace, "snapshot-resume-"+string(snap.UID), &corev1.Pod{})
		if err == nil && (!pod.DeletionTimestamp.IsZero() || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded) {
			return fmt.Errorf("resume Pod %s is %s (deleted: %v), want a new one", pod.Name, pod.Status.Phase, !pod.DeletionTimestamp.IsZero())
		}
		return err
	})
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	if pod.Spec.NodeName != nodeName || !strings.Contains(args, "resume ") || !strings.Contains(args, "--container-id="+containerID) {
		t.Errorf("resume Pod on node %q with args %q: want node %s and container %s", pod.Spec.NodeName, args, nodeName, containerID)
	}
	finishCapture(t, pod, phase, snapshot.Result{})
	return pod
}
