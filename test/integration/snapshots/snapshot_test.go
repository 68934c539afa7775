package snapshots

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

const snapImage = "registry.test:5000/snapshots/x@sha256:2222222222222222222222222222222222222222222222222222222222222222"

// TestValidation: the schema refuses bad names and any spec change, naming the field.
func TestValidation(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	for name, tc := range map[string]struct {
		snap *snapshotsv1alpha1.SandboxSnapshot
		want string
	}{
		"no sandbox":        {builder.MakeSnapshot("a", ns, "").Obj(), "spec.sandboxName"},
		"bad sandbox name":  {builder.MakeSnapshot("b", ns, "Not_A_Name").Obj(), "sandboxName must be a Sandbox name"},
		"bad container":     {builder.MakeSnapshot("c", ns, "sb").Container("Main!").Obj(), "containerName must be a container name"},
		"bad template name": {builder.MakeSnapshot("d", ns, "sb").Template("UPPER").Obj(), "templateName must be a SandboxTemplate name"},
	} {
		err := env.Client.Create(ctx, tc.snap)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: create error %v, want Invalid naming %q", name, err, tc.want)
		}
	}
	snap := builder.MakeSnapshot("ok", ns, "sb").Obj()
	create(t, snap)
	// A patch without a resourceVersion: the controller adding its finalizer meanwhile must not
	// turn the answer into a conflict.
	orig := snap.DeepCopy()
	snap.Spec.SandboxName = "other"
	if err := env.Client.Patch(ctx, snap, client.MergeFrom(orig)); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec is immutable") {
		t.Errorf("changing spec.sandboxName: error %v, want Invalid saying the spec is immutable", err)
	}
}

// TestSandboxNotFound: a snapshot of a Sandbox that does not exist fails, never Ready.
func TestSandboxNotFound(t *testing.T) {
	ns := env.Namespace(t)
	create(t, builder.MakeSnapshot("snap", ns, "missing").Obj())
	snap := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseFailed, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonSandboxNotFound)
	if err := builder.HasCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionReady, metav1.ConditionFalse, snapshotsv1alpha1.ReasonSandboxNotFound); err != nil {
		t.Error(err)
	}
}

// TestCaptureToTemplate: a Ready Sandbox made from a template is captured by one Pod on its
// node; its result makes the snapshot Ready and publishes a template that runs the image, built
// from the source template (not the Sandbox, whose env may hold a claim's secrets), with the
// template's annotations (its sandboxd runtime, which locks unclaimed members).
func TestCaptureToTemplate(t *testing.T) {
	ns := env.Namespace(t)
	base := builder.MakeTemplate("base", ns).Obj()
	base.Annotations = map[string]string{extensionsv1beta1.RuntimeAnnotation: extensionsv1beta1.RuntimeSandboxd}
	create(t, base)
	sb := builder.MakeSandbox("sb", ns).Obj()
	sb.Annotations = map[string]string{agentsv1beta1.SandboxTemplateRefAnnotation: "base"}
	sb.Spec.PodTemplate.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CLAIM_SECRET", Value: "s3cret"}}
	runSandbox(t, sb)

	create(t, builder.MakeSnapshot("snap", ns, "sb").Template("from-snap").Obj())
	snap := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseCapturing, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureRunning)
	pod := capturePod(t, snap)
	checkCapturePod(t, pod, snap)

	finishCapture(t, pod, corev1.PodSucceeded, snapshot.Result{Image: snapImage, SizeBytes: 4096, PausedMilliseconds: 12})
	snap = waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseReady, snapshotsv1alpha1.ConditionReady, metav1.ConditionTrue, snapshotsv1alpha1.ReasonReady)
	want := snapshotsv1alpha1.SandboxSnapshotStatus{
		Phase: snapshotsv1alpha1.SnapshotPhaseReady, Contents: []snapshotsv1alpha1.SnapshotContent{snapshotsv1alpha1.SnapshotContentFilesystem},
		Image: snapImage, BaseImage: baseImageDigest, SizeBytes: ptr.To[int64](4096), PausedMilliseconds: ptr.To[int64](12),
		NodeName: nodeName, ContainerID: containerID, TemplateName: "from-snap", ObservedGeneration: snap.Generation,
	}
	got := snap.Status.DeepCopy()
	got.Conditions, got.CaptureStartTime, got.CompletionTime = nil, nil, nil
	if d := cmp.Diff(want, *got); d != "" {
		t.Errorf("status (-want +got):\n%s", d)
	}
	if snap.Status.CaptureStartTime == nil || snap.Status.CompletionTime == nil {
		t.Errorf("captureStartTime %v and completionTime %v must both be set", snap.Status.CaptureStartTime, snap.Status.CompletionTime)
	}

	tpl, err := get(framework.Context(t, framework.DefaultTimeout), ns, "from-snap", &extensionsv1beta1.SandboxTemplate{})
	if err != nil {
		t.Fatalf("published template: %v", err)
	}
	if !metav1.IsControlledBy(tpl, snap) {
		t.Errorf("template from-snap is controlled by %v, want the snapshot", metav1.GetControllerOf(tpl))
	}
	c := tpl.Spec.PodTemplate.Spec.Containers[0]
	if c.Image != snapImage || len(c.Env) != 0 {
		t.Errorf("published container runs %q with env %v; want %q and the source template's (empty) env", c.Image, c.Env, snapImage)
	}
	if got := tpl.Annotations[extensionsv1beta1.RuntimeAnnotation]; got != extensionsv1beta1.RuntimeSandboxd {
		t.Errorf("published template's %s is %q; want the source template's %q", extensionsv1beta1.RuntimeAnnotation, got, extensionsv1beta1.RuntimeSandboxd)
	}
	framework.Eventually(t, func(ctx context.Context) error { return goneOrTerminating(ctx, captureNamespace, pod.Name) })
}

// checkCapturePod: the capture Pod runs on the source's node with the controller's command line,
// no ports and no API token.
func checkCapturePod(t *testing.T, pod *corev1.Pod, snap *snapshotsv1alpha1.SandboxSnapshot) {
	t.Helper()
	s := pod.Spec
	if s.NodeName != nodeName || ptr.Deref(s.AutomountServiceAccountToken, true) || len(s.Containers) != 1 {
		t.Fatalf("capture Pod on node %q, automount %v, %d containers; want node %q, no token, one container", s.NodeName, s.AutomountServiceAccountToken, len(s.Containers), nodeName)
	}
	c := s.Containers[0]
	if c.Image != testCaptureImage || len(c.Ports) != 0 {
		t.Errorf("capture container image %q ports %v; want %q and no ports", c.Image, c.Ports, testCaptureImage)
	}
	for _, arg := range []string{
		"--container-id=" + containerID,
		"--base-image=" + baseImageDigest,
		fmt.Sprintf("--target=%s/%s/%s:%s", testRepository, snap.Namespace, snap.Name, snap.UID),
	} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("capture args %q lack %q", c.Args, arg)
		}
	}
}

// TestCaptureFailed: a capture that reports an error fails the snapshot with that error, and no
// template is published.
func TestCaptureFailed(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, builder.MakeSandbox("sb", ns).Obj())
	create(t, builder.MakeSnapshot("snap", ns, "sb").Obj())
	snap := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseCapturing, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureRunning)
	pod := capturePod(t, snap)
	finishCapture(t, pod, corev1.PodFailed, snapshot.Result{Error: "layer: /tmp/fifo is a FIFO; refusing it", PausedMilliseconds: 3})
	snap = waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseFailed, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureFailed)
	if c := findCondition(snap, snapshotsv1alpha1.ConditionCaptured); !strings.Contains(c.Message, "is a FIFO") {
		t.Errorf("Captured message %q does not carry the capture's error", c.Message)
	}
	if err := builder.HasCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionReady, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureFailed); err != nil {
		t.Error(err)
	}
	if _, err := get(framework.Context(t, framework.DefaultTimeout), ns, "snap", &extensionsv1beta1.SandboxTemplate{}); !apierrors.IsNotFound(err) {
		t.Errorf("a failed snapshot published a template (get error %v)", err)
	}
	framework.Eventually(t, func(ctx context.Context) error { return goneOrTerminating(ctx, captureNamespace, pod.Name) })
	// A failed capture is followed by a resume Pod, whose success the status records.
	resume := resumePod(t, snap, corev1.PodSucceeded)
	waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseFailed, snapshotsv1alpha1.ConditionSourceResumed, metav1.ConditionTrue, snapshotsv1alpha1.ReasonResumed)
	framework.Eventually(t, func(ctx context.Context) error { return goneOrTerminating(ctx, captureNamespace, resume.Name) })
}

// TestCaptureLost: a capture Pod that vanishes before reporting (killed with SIGKILL, so it
// could not resume the source) fails the snapshot, and a resume Pod on the source's node
// resumes the container; a resume Pod that fails is retried. A restart of the controller in
// between changes nothing: the state is in the status and the Pods.
func TestCaptureLost(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, builder.MakeSandbox("sb", ns).Obj())
	create(t, builder.MakeSnapshot("snap", ns, "sb").Obj())
	snap := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseCapturing, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureRunning)
	if snap.Status.ContainerID != containerID {
		t.Errorf("status.containerID %q, want %q", snap.Status.ContainerID, containerID)
	}
	pod := capturePod(t, snap)
	if err := env.Client.Delete(framework.Context(t, framework.DefaultTimeout), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatalf("deleting the capture Pod: %v", err)
	}
	waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseFailed, snapshotsv1alpha1.ConditionReady, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureLost)
	resumePod(t, snap, corev1.PodFailed)
	c := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseFailed, snapshotsv1alpha1.ConditionSourceResumed, metav1.ConditionFalse, snapshotsv1alpha1.ReasonResumeFailed)
	if msg := findCondition(c, snapshotsv1alpha1.ConditionSourceResumed).Message; !strings.Contains(msg, "kubectl -n "+captureNamespace+" logs snapshot-resume-") {
		t.Errorf("SourceResumed message %q does not say where to look", msg)
	}
	// After the retry delay the failed Pod is replaced.
	resumePod(t, snap, corev1.PodSucceeded)
	waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseFailed, snapshotsv1alpha1.ConditionSourceResumed, metav1.ConditionTrue, snapshotsv1alpha1.ReasonResumed)
}

// TestNotReadySandboxWaits: a snapshot of a Sandbox that is not Ready waits without a capture
// Pod, and starts once the Sandbox is Ready.
func TestNotReadySandboxWaits(t *testing.T) {
	ns := env.Namespace(t)
	create(t, builder.MakeSandbox("sb", ns).Obj())
	create(t, builder.MakeSnapshot("snap", ns, "sb").Obj())
	snap := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhasePending, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonSandboxNotReady)
	if _, err := get(framework.Context(t, framework.DefaultTimeout), captureNamespace, "snapshot-"+string(snap.UID), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a capture Pod exists for a Sandbox that is not Ready (get error %v)", err)
	}
	playNode(t, builder.MakeSandbox("sb", ns).Obj())
	waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseCapturing, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureRunning)
}

// TestNamespaceIsolation: a snapshot cannot name a Sandbox of another namespace, and another
// namespace's pools cannot start from a snapshot's template, while the owner's can (fork).
func TestNamespaceIsolation(t *testing.T) {
	owner, other := env.Namespace(t), env.Namespace(t)
	runSandbox(t, builder.MakeSandbox("sb", owner).Obj())

	create(t, builder.MakeSnapshot("steal", other, "sb").Obj())
	waitSnapshot(t, other, "steal", snapshotsv1alpha1.SnapshotPhaseFailed, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonSandboxNotFound)

	create(t, builder.MakeSnapshot("snap", owner, "sb").Obj())
	snap := waitSnapshot(t, owner, "snap", snapshotsv1alpha1.SnapshotPhaseCapturing, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureRunning)
	finishCapture(t, capturePod(t, snap), corev1.PodSucceeded, snapshot.Result{Image: snapImage, SizeBytes: 1})
	waitSnapshot(t, owner, "snap", snapshotsv1alpha1.SnapshotPhaseReady, snapshotsv1alpha1.ConditionReady, metav1.ConditionTrue, snapshotsv1alpha1.ReasonReady)

	// Fork is a warm pool of the snapshot's template: in the owner's namespace it starts
	// Sandboxes running the snapshot's image.
	create(t, builder.MakeWarmPool("fork", owner, "snap").Replicas(2).Obj())
	framework.Eventually(t, func(ctx context.Context) error {
		var sbs agentsv1beta1.SandboxList
		if err := env.Client.List(ctx, &sbs, client.InNamespace(owner)); err != nil {
			return err
		}
		forks := 0
		for _, sb := range sbs.Items {
			if sb.Spec.PodTemplate.Spec.Containers[0].Image == snapImage {
				forks++
			}
		}
		if forks != 2 {
			return fmt.Errorf("%d Sandboxes run the snapshot's image in %s, want 2", forks, owner)
		}
		return nil
	})

	// In another namespace the same template name resolves to nothing.
	create(t, builder.MakeWarmPool("thief", other, "snap").Replicas(1).Obj())
	framework.Eventually(t, func(ctx context.Context) error {
		pool, err := get(ctx, other, "thief", &extensionsv1beta1.SandboxWarmPool{})
		if err != nil {
			return err
		}
		return builder.HasCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionTemplateReady, metav1.ConditionFalse, extensionsv1beta1.PoolReasonTemplateNotFound)
	})
	var sbs agentsv1beta1.SandboxList
	if err := env.Client.List(framework.Context(t, framework.DefaultTimeout), &sbs, client.InNamespace(other)); err != nil || len(sbs.Items) != 0 {
		t.Errorf("namespace %s has %d Sandboxes (list error %v); a pool of another namespace's snapshot must start none", other, len(sbs.Items), err)
	}
}

// TestTemplateConflict: a template of the same name that the snapshot does not control is left
// alone; the snapshot is captured but not Ready.
func TestTemplateConflict(t *testing.T) {
	ns := env.Namespace(t)
	create(t, builder.MakeTemplate("taken", ns).Obj())
	runSandbox(t, builder.MakeSandbox("sb", ns).Obj())
	create(t, builder.MakeSnapshot("snap", ns, "sb").Template("taken").Obj())
	snap := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseCapturing, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureRunning)
	finishCapture(t, capturePod(t, snap), corev1.PodSucceeded, snapshot.Result{Image: snapImage, SizeBytes: 1})
	waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseReady, snapshotsv1alpha1.ConditionReady, metav1.ConditionFalse, snapshotsv1alpha1.ReasonTemplateConflict)
	tpl, err := get(framework.Context(t, framework.DefaultTimeout), ns, "taken", &extensionsv1beta1.SandboxTemplate{})
	if err != nil || tpl.Spec.PodTemplate.Spec.Containers[0].Image != builder.DefaultImage || metav1.GetControllerOf(tpl) != nil {
		t.Errorf("the existing template was changed: %+v (error %v)", tpl, err)
	}
}

// TestDeleteWhileCapturing: deleting a snapshot mid-capture deletes its capture Pod (whose
// SIGTERM path resumes the source) and then the snapshot.
func TestDeleteWhileCapturing(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, builder.MakeSandbox("sb", ns).Obj())
	create(t, builder.MakeSnapshot("snap", ns, "sb").Obj())
	snap := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseCapturing, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureRunning)
	pod := capturePod(t, snap)
	if err := env.Client.Delete(framework.Context(t, framework.DefaultTimeout), snap); err != nil {
		t.Fatal(err)
	}
	// Deletion waits for the capture to stop (the kubelet's SIGTERM, played here), then for a
	// resume Pod to make sure the source is not left paused.
	framework.Eventually(t, func(ctx context.Context) error { return goneOrTerminating(ctx, captureNamespace, pod.Name) })
	finishCapture(t, pod, corev1.PodFailed, snapshot.Result{Error: "capture stopped: context canceled"})
	resume := resumePod(t, snap, corev1.PodSucceeded)
	framework.Eventually(t, func(ctx context.Context) error {
		if err := goneOrTerminating(ctx, captureNamespace, resume.Name); err != nil {
			return err
		}
		if _, err := get(ctx, ns, "snap", &snapshotsv1alpha1.SandboxSnapshot{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("snapshot still exists (get error %v)", err)
		}
		return goneOrTerminating(ctx, captureNamespace, pod.Name)
	})
}

func findCondition(snap *snapshotsv1alpha1.SandboxSnapshot, typ string) metav1.Condition {
	for _, c := range snap.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// TestForgedStatusResumesNothing: the resume Pod runs with node privileges on the container a
// snapshot's status names. A status naming a container that is not its own Sandbox's (here
// another namespace's running container, as someone allowed to write the status could forge)
// gets no resume Pod: the guard ends with SourceGone.
func TestForgedStatusResumesNothing(t *testing.T) {
	victim := env.Namespace(t)
	runSandbox(t, builder.MakeSandbox("victim", victim).Obj())
	ns := env.Namespace(t)
	create(t, builder.MakeSandbox("sb", ns).Obj()) // never runs: no capture starts
	create(t, builder.MakeSnapshot("snap", ns, "sb").Obj())
	snap := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhasePending, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonSandboxNotReady)
	now := metav1.Now()
	snap.Status.Phase = snapshotsv1alpha1.SnapshotPhaseFailed
	snap.Status.CaptureStartTime = &now
	snap.Status.ContainerID = containerID // the victim's running container
	snap.Status.NodeName = nodeName
	if err := env.Client.Status().Update(framework.Context(t, framework.DefaultTimeout), snap); err != nil {
		t.Fatalf("forging the snapshot's status: %v", err)
	}
	c := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseFailed, snapshotsv1alpha1.ConditionSourceResumed, metav1.ConditionTrue, snapshotsv1alpha1.ReasonSourceGone)
	if msg := findCondition(c, snapshotsv1alpha1.ConditionSourceResumed).Message; !strings.Contains(msg, containerID) {
		t.Errorf("SourceResumed message %q does not name the container", msg)
	}
	if _, err := get(framework.Context(t, framework.DefaultTimeout), captureNamespace, "snapshot-resume-"+string(snap.UID), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a resume Pod was made for another namespace's container (get error %v)", err)
	}
}
