package snapshots

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// rootfsImage is the image the tests' nth capture reports, one per suspension (testRepository is
// known once the package's registry runs).
func rootfsImage(n int) string {
	digit := string(rune('2' + n))
	return fmt.Sprintf("%s/ns/sb-rootfs-%d@sha256:%s", testRepository, n, strings.Repeat(digit, 64))
}

// keepingSandbox is a Sandbox that keeps its root filesystem across suspensions.
func keepingSandbox(ns string) *agentsv1beta1.Sandbox {
	return builder.MakeSandbox("sb", ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendRootfs).Obj()
}

// setMode patches the Sandbox's operatingMode, as kubectl, the idle controller or the E2B front
// door do.
func setMode(t *testing.T, ns string, mode agentsv1beta1.SandboxOperatingMode) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		sb, err := get(ctx, ns, "sb", &agentsv1beta1.Sandbox{})
		if err != nil {
			return err
		}
		orig := sb.DeepCopy()
		sb.Spec.OperatingMode = mode
		return env.Client.Patch(ctx, sb, client.MergeFrom(orig))
	})
}

// waitRootfsKept waits for the Sandbox's RootfsKept condition at status and reason, with a
// message containing want, and returns the Sandbox.
func waitRootfsKept(t *testing.T, ns string, status metav1.ConditionStatus, reason, want string) *agentsv1beta1.Sandbox {
	t.Helper()
	var sb *agentsv1beta1.Sandbox
	framework.Eventually(t, func(ctx context.Context) error {
		var err error
		if sb, err = get(ctx, ns, "sb", &agentsv1beta1.Sandbox{}); err != nil {
			return err
		}
		if err := builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionRootfsKept, status, reason); err != nil {
			return err
		}
		for _, c := range sb.Status.Conditions {
			if c.Type == agentsv1beta1.SandboxConditionRootfsKept && !strings.Contains(c.Message, want) {
				return fmt.Errorf("RootfsKept message %q does not contain %q", c.Message, want)
			}
		}
		return nil
	})
	return sb
}

// suspendCapture waits for the capture the Sandbox controller made of the Sandbox's current Pod
// and returns it with that Pod.
func suspendCapture(t *testing.T, ns string) (*snapshotsv1alpha1.SandboxSnapshot, *corev1.Pod) {
	t.Helper()
	pod, err := get(framework.Context(t, framework.DefaultTimeout), ns, "sb", &corev1.Pod{})
	if err != nil {
		t.Fatalf("reading the Sandbox's Pod: %v", err)
	}
	name := "sb-rootfs-" + string(pod.UID)[:8]
	snap := waitSnapshot(t, ns, name, snapshotsv1alpha1.SnapshotPhaseCapturing, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureRunning)
	if snap.Labels[snapshotsv1alpha1.SuspendPodUIDLabel] != string(pod.UID) || snap.Spec.SandboxName != "sb" || snap.Spec.ContainerName != "main" {
		t.Errorf("capture %s: labels %v, spec %+v; want the Pod's UID, Sandbox sb, container main", name, snap.Labels, snap.Spec)
	}
	sb, err := get(framework.Context(t, framework.DefaultTimeout), ns, "sb", &agentsv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(snap, sb) {
		t.Errorf("capture %s is controlled by %v, want the Sandbox", name, metav1.GetControllerOf(snap))
	}
	return snap, pod
}

// podStays checks that the Pod with uid has not been deleted.
func podStays(t *testing.T, ns string, uid string) {
	t.Helper()
	pod, err := get(framework.Context(t, framework.DefaultTimeout), ns, "sb", &corev1.Pod{})
	if err != nil || string(pod.UID) != uid || !pod.DeletionTimestamp.IsZero() {
		t.Fatalf("the Pod of a suspension whose capture is not Ready was deleted or replaced (get error %v)", err)
	}
}

// removePod plays the kubelet confirming the deletion of the suspended Sandbox's Pod.
func removePod(t *testing.T, ns string, uid string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		pod, err := get(ctx, ns, "sb", &corev1.Pod{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case string(pod.UID) != uid:
			return fmt.Errorf("pod sb has UID %s, want the suspended one %s or none", pod.UID, uid)
		case pod.DeletionTimestamp.IsZero():
			return fmt.Errorf("pod sb is not being deleted")
		}
		return env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))
	})
}

// resumedPod waits for the Pod of the resumed Sandbox and checks it runs image with the
// Sandbox's own spec otherwise: the tokens by reference to the credentials Secret.
func resumedPod(t *testing.T, ns, image string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, func(ctx context.Context) error {
		var err error
		if pod, err = get(ctx, ns, "sb", &corev1.Pod{}); err != nil {
			return err
		}
		if got := pod.Spec.Containers[0].Image; got != image {
			return fmt.Errorf("pod sb runs %q, want %q", got, image)
		}
		return nil
	})
	refs := 0
	for _, e := range pod.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "sb-credentials" {
			refs++
		}
	}
	if refs == 0 {
		t.Errorf("the resumed Pod's container has no token from Secret sb-credentials; env %v", pod.Spec.Containers[0].Env)
	}
	return pod
}

// TestSuspendKeepsRootfs: a Sandbox that keeps its root filesystem is captured before its Pod
// goes, resumes on the captured image, and the next suspension captures on top of it (the base
// image of the second capture is the first); the first capture is deleted once superseded.
func TestSuspendKeepsRootfs(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, keepingSandbox(ns))
	waitRootfsKept(t, ns, metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsRunning, "the pod template's image")

	setMode(t, ns, agentsv1beta1.SandboxOperatingModeSuspended)
	snap1, pod1 := suspendCapture(t, ns)
	waitRootfsKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsCapturing, snap1.Name)
	podStays(t, ns, string(pod1.UID))
	capture := capturePod(t, snap1)
	if args := strings.Join(capture.Spec.Containers[0].Args, " "); !strings.Contains(args, "--base-image="+baseImageDigest) {
		t.Errorf("first capture's args %q, want base image %s", args, baseImageDigest)
	}
	finishCapture(t, capture, corev1.PodSucceeded, snapshot.Result{Image: rootfsImage(1), SizeBytes: 100, PausedMilliseconds: 5})
	sb := waitRootfsKept(t, ns, metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsCaptured, rootfsImage(1))
	if got := sb.Annotations[snapshotsv1alpha1.ResumeFromAnnotation]; got != snap1.Name {
		t.Errorf("annotation %s is %q, want %q", snapshotsv1alpha1.ResumeFromAnnotation, got, snap1.Name)
	}
	removePod(t, ns, string(pod1.UID))
	framework.Eventually(t, func(ctx context.Context) error {
		sb, err := get(ctx, ns, "sb", &agentsv1beta1.Sandbox{})
		if err != nil {
			return err
		}
		return builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionSuspended, metav1.ConditionTrue, "")
	})

	setMode(t, ns, agentsv1beta1.SandboxOperatingModeRunning)
	resumedPod(t, ns, rootfsImage(1))
	playNode(t, sb)
	waitRootfsKept(t, ns, metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsRunning, rootfsImage(1))

	setMode(t, ns, agentsv1beta1.SandboxOperatingModeSuspended)
	snap2, pod2 := suspendCapture(t, ns)
	capture = capturePod(t, snap2)
	if args := strings.Join(capture.Spec.Containers[0].Args, " "); !strings.Contains(args, "--base-image="+rootfsImage(1)) {
		t.Errorf("second capture's args %q, want base image %s (each capture layers on the last)", args, rootfsImage(1))
	}
	finishCapture(t, capture, corev1.PodSucceeded, snapshot.Result{Image: rootfsImage(2), SizeBytes: 100, PausedMilliseconds: 5})
	waitRootfsKept(t, ns, metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsCaptured, rootfsImage(2))
	removePod(t, ns, string(pod2.UID))
	framework.Eventually(t, func(ctx context.Context) error {
		_, err := get(ctx, ns, snap1.Name, &snapshotsv1alpha1.SandboxSnapshot{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("superseded capture %s still exists (get error %v)", snap1.Name, err)
		}
		return nil
	})
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeRunning)
	resumedPod(t, ns, rootfsImage(2))
}

// TestSuspendCaptureFailedKeepsPod: a capture that fails refuses the suspension: the Pod keeps
// running (nothing is lost), the condition says why and how to retry, the source is resumed by
// the snapshot's guard. Running again drops the failed capture; suspending again retries.
func TestSuspendCaptureFailedKeepsPod(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, keepingSandbox(ns))
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeSuspended)
	snap, pod := suspendCapture(t, ns)
	finishCapture(t, capturePod(t, snap), corev1.PodFailed, snapshot.Result{Error: "pushing the layer: registry.test:5000 refused the connection"})
	waitRootfsKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsCaptureFailed, "refused the connection")
	podStays(t, ns, string(pod.UID))
	resumePod(t, snap, corev1.PodSucceeded)
	waitSnapshot(t, ns, snap.Name, snapshotsv1alpha1.SnapshotPhaseFailed, snapshotsv1alpha1.ConditionSourceResumed, metav1.ConditionTrue, snapshotsv1alpha1.ReasonResumed)
	podStays(t, ns, string(pod.UID))

	setMode(t, ns, agentsv1beta1.SandboxOperatingModeRunning)
	framework.Eventually(t, func(ctx context.Context) error {
		_, err := get(ctx, ns, snap.Name, &snapshotsv1alpha1.SandboxSnapshot{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed capture %s of the running Pod still exists (get error %v)", snap.Name, err)
		}
		return nil
	})
	waitRootfsKept(t, ns, metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsRunning, "the pod template's image")
	podStays(t, ns, string(pod.UID))

	setMode(t, ns, agentsv1beta1.SandboxOperatingModeSuspended)
	snap, _ = suspendCapture(t, ns)
	finishCapture(t, capturePod(t, snap), corev1.PodSucceeded, snapshot.Result{Image: rootfsImage(1)})
	waitRootfsKept(t, ns, metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsCaptured, rootfsImage(1))
}

// TestSuspendCaptureSurvivesRestart: the controllers stop while a suspension's capture runs and
// the capture finishes meanwhile; new controllers, with nothing but the cluster's state, find
// the capture, delete the Pod only then, and resume on the captured image.
func TestSuspendCaptureSurvivesRestart(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, keepingSandbox(ns))
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeSuspended)
	snap, pod := suspendCapture(t, ns)
	capture := capturePod(t, snap)
	restartControllers(t, func() {
		finishCapture(t, capture, corev1.PodSucceeded, snapshot.Result{Image: rootfsImage(1)})
		podStays(t, ns, string(pod.UID))
	})
	waitRootfsKept(t, ns, metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsCaptured, rootfsImage(1))
	removePod(t, ns, string(pod.UID))
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeRunning)
	resumedPod(t, ns, rootfsImage(1))
}

// TestSuspendWithoutOptIn: without the annotation a suspension deletes the Pod at once, makes no
// capture and reports no RootfsKept condition, as upstream.
func TestSuspendWithoutOptIn(t *testing.T) {
	ns := env.Namespace(t)
	sb := builder.MakeSandbox("sb", ns).Obj()
	runSandbox(t, sb)
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeSuspended)
	framework.Eventually(t, func(ctx context.Context) error { return goneOrTerminating(ctx, ns, "sb") })
	var snaps snapshotsv1alpha1.SandboxSnapshotList
	if err := env.Client.List(framework.Context(t, framework.DefaultTimeout), &snaps, client.InNamespace(ns)); err != nil || len(snaps.Items) != 0 {
		t.Errorf("a Sandbox without %s got snapshots %v (list error %v)", snapshotsv1alpha1.SuspendAnnotation, snaps.Items, err)
	}
	got, err := get(framework.Context(t, framework.DefaultTimeout), ns, "sb", &agentsv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == agentsv1beta1.SandboxConditionRootfsKept {
			t.Errorf("a Sandbox without %s has condition %+v", snapshotsv1alpha1.SuspendAnnotation, c)
		}
	}
}

// TestSuspendWithAnUnknownValue: an annotation value other than "rootfs" is not taken for the
// opt-in: the Sandbox suspends as without it, and RootfsKept names the value and the fix.
func TestSuspendWithAnUnknownValue(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, builder.MakeSandbox("sb", ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, "disk").Obj())
	waitRootfsKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsInvalidAnnotation, `is "disk"; set it to "rootfs"`)
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeSuspended)
	framework.Eventually(t, func(ctx context.Context) error { return goneOrTerminating(ctx, ns, "sb") })
	var snaps snapshotsv1alpha1.SandboxSnapshotList
	if err := env.Client.List(framework.Context(t, framework.DefaultTimeout), &snaps, client.InNamespace(ns)); err != nil || len(snaps.Items) != 0 {
		t.Errorf("snapshots %v (list error %v); want none for an unknown value", snaps.Items, err)
	}
}

// TestSuspendWithoutSnapshotsConfigured: on a cluster without a snapshot repository the
// annotation cannot be honoured; refusing every suspension would keep the Pod forever, so the
// Sandbox suspends as upstream and RootfsKept says the root filesystem is not kept and why.
func TestSuspendWithoutSnapshotsConfigured(t *testing.T) {
	restartControllersWith(t, func() {}, func(o *manager.Options) { o.SnapshotRepository = "" })
	t.Cleanup(func() { restartControllers(t, func() {}) })
	ns := env.Namespace(t)
	runSandbox(t, keepingSandbox(ns))
	waitRootfsKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsNotConfigured, "--snapshot-repository")
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeSuspended)
	framework.Eventually(t, func(ctx context.Context) error { return goneOrTerminating(ctx, ns, "sb") })
	var snaps snapshotsv1alpha1.SandboxSnapshotList
	if err := env.Client.List(framework.Context(t, framework.DefaultTimeout), &snaps, client.InNamespace(ns)); err != nil || len(snaps.Items) != 0 {
		t.Errorf("snapshots %v (list error %v); want none without a repository", snaps.Items, err)
	}
	waitRootfsKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsNotConfigured, "not kept")
}
