package sandbox

// Suspend that keeps the root filesystem (docs/design/snapshots.md): a Sandbox annotated
// snapshots.paddock.dev/suspend: rootfs has its first container captured into a SandboxSnapshot
// it controls before its Pod is deleted, and its next Pod runs the captured image. The state is
// what the cluster holds, read every pass: the snapshots the Sandbox controls, labelled with the
// UID of the Pod each one captured.

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/naming"
)

// stepRootfs labels errors of the root filesystem captures.
const stepRootfs = "rootfs"

// rootfsObservation is what a pass saw of a Sandbox that keeps its root filesystem.
type rootfsObservation struct {
	// on is set when the Sandbox asks for it and the controller serves it; the condition exists
	// only then.
	on bool
	// unavailable is set when the cluster cannot capture (snapshots not configured).
	unavailable bool
	// snapshots are the suspend captures the Sandbox controls.
	snapshots []snapshotsv1alpha1.SandboxSnapshot
	// hold is set while the Pod of a suspended Sandbox must stay: its capture runs or failed.
	hold bool
	// status, reason and message are the RootfsKept condition; empty reason: not decided.
	status          metav1.ConditionStatus
	reason, message string
}

func (o *rootfsObservation) set(status metav1.ConditionStatus, reason, format string, args ...any) {
	o.status, o.reason, o.message = status, reason, fmt.Sprintf(format, args...)
}

// keepsRootfs reports whether sb asks to keep its root filesystem across suspensions.
func keepsRootfs(sb *agentsv1beta1.Sandbox) bool {
	return sb.Annotations[snapshotsv1alpha1.SuspendAnnotation] == snapshotsv1alpha1.SuspendRootfs
}

// rootfsContainer is the container whose root filesystem is kept: the first one.
func rootfsContainer(sb *agentsv1beta1.Sandbox) string {
	if c := sb.Spec.PodTemplate.Spec.Containers; len(c) > 0 {
		return c[0].Name
	}
	return ""
}

// observeRootfs lists the suspend captures sb controls, when it keeps its root filesystem.
func (r *Reconciler) observeRootfs(ctx context.Context, sb *agentsv1beta1.Sandbox, obs *observation) error {
	value, asked := sb.Annotations[snapshotsv1alpha1.SuspendAnnotation]
	if !r.opts.SuspendCaptures || !asked {
		return nil
	}
	if value == snapshotsv1alpha1.SuspendMemory {
		return nil // memory.go
	}
	obs.rootfs.on = true
	if !keepsRootfs(sb) {
		// A typo must not pass for the opt-in: suspend as without it, and say what to set.
		obs.rootfs.unavailable = true
		obs.rootfs.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsInvalidAnnotation,
			"the root filesystem is not kept: annotation %s is %q; set it to %q (or %q under gVisor), or remove it",
			snapshotsv1alpha1.SuspendAnnotation, value, snapshotsv1alpha1.SuspendRootfs, snapshotsv1alpha1.SuspendMemory)
		return nil
	}
	if r.opts.SuspendCapturesUnavailable != "" {
		// Refusing every suspension would keep the Pod forever: suspend as upstream, and say so.
		obs.rootfs.unavailable = true
		obs.rootfs.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsNotConfigured,
			"the root filesystem is not kept: %s", r.opts.SuspendCapturesUnavailable)
		return nil
	}
	var list snapshotsv1alpha1.SandboxSnapshotList
	if err := r.client.List(ctx, &list, client.InNamespace(sb.Namespace),
		client.MatchingLabels{agentsv1beta1.SandboxNameHashLabel: naming.NameHash(sb.Name)}); err != nil {
		return fmt.Errorf("listing the root filesystem snapshots of sandbox %q: %w", sb.Name, err)
	}
	for _, s := range list.Items {
		if s.Labels[snapshotsv1alpha1.SuspendPodUIDLabel] != "" && s.Spec.SandboxName == sb.Name && metav1.IsControlledBy(&s, sb) {
			obs.rootfs.snapshots = append(obs.rootfs.snapshots, s)
		}
	}
	return nil
}

// latestCapture is the newest Ready suspend capture in snaps that did not capture the Pod with
// UID skip (a Pod that still runs has moved on from its own capture); nil when there is none.
func latestCapture(snaps []snapshotsv1alpha1.SandboxSnapshot, skip string) *snapshotsv1alpha1.SandboxSnapshot {
	var latest *snapshotsv1alpha1.SandboxSnapshot
	for i := range snaps {
		s := &snaps[i]
		if s.Status.Phase != snapshotsv1alpha1.SnapshotPhaseReady || s.Status.Image == "" || !s.DeletionTimestamp.IsZero() ||
			(skip != "" && s.Labels[snapshotsv1alpha1.SuspendPodUIDLabel] == skip) {
			continue
		}
		if latest == nil || completedBefore(latest, s) {
			latest = s
		}
	}
	return latest
}

func completedBefore(a, b *snapshotsv1alpha1.SandboxSnapshot) bool {
	ta, tb := a.Status.CompletionTime, b.Status.CompletionTime
	switch {
	case ta == nil || tb == nil:
		return ta == nil && tb != nil
	case !ta.Equal(tb):
		return ta.Before(tb)
	}
	return a.Name < b.Name
}

// holdForCapture decides whether the owned Pod of a suspended Sandbox that keeps its root
// filesystem must stay: until its capture is Ready, and after a failed one, so that nothing the
// sandbox wrote is lost. A Pod with no running container has nothing to capture and goes.
func (r *Reconciler) holdForCapture(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, obs *observation) error {
	ro := &obs.rootfs
	if !ro.on || ro.unavailable || pod == nil || kube.OwnershipOf(pod, sb.UID) != kube.OwnedByUs || !pod.DeletionTimestamp.IsZero() {
		return nil
	}
	container := rootfsContainer(sb)
	if s := containerStatus(pod, container); s == nil || s.State.Running == nil {
		ro.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsNotCaptured,
			"Pod %s had no running container %q to capture; the next Pod starts from %s", pod.Name, container, resumeSource(latestCapture(ro.snapshots, "")))
		return nil
	}
	snap := findCapture(ro.snapshots, pod.UID)
	if snap == nil {
		ro.hold = true
		ro.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsCapturing,
			"SandboxSnapshot %s captures container %q of Pod %s before it is deleted", suspendSnapshotName(sb, pod), container, pod.Name)
		return r.createCapture(ctx, sb, pod, container)
	}
	switch {
	case !snap.DeletionTimestamp.IsZero():
		// A failed capture dropped when the Sandbox ran again; the retry takes its name.
		ro.hold = true
		ro.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsCapturing,
			"waiting for the earlier capture %s of Pod %s to be deleted before capturing it again", snap.Name, pod.Name)
		return nil
	case snap.Status.Phase == snapshotsv1alpha1.SnapshotPhaseReady:
		ro.set(metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsCaptured, "the next Pod starts from %s", resumeSource(snap))
		setResumeFromAnnotation(sb, snap.Name)
		return nil
	case snap.Status.Phase == snapshotsv1alpha1.SnapshotPhaseFailed:
		ro.hold = true
		ro.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsCaptureFailed,
			"SandboxSnapshot %s failed (%s), so Pod %s keeps running and nothing is lost; set spec.operatingMode to Running and then Suspended to try again, or remove annotation %s to suspend without the root filesystem",
			snap.Name, capturedMessage(snap), pod.Name, snapshotsv1alpha1.SuspendAnnotation)
		return nil
	}
	ro.hold = true
	ro.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsCapturing,
		"SandboxSnapshot %s captures container %q of Pod %s before it is deleted: %s", snap.Name, container, pod.Name, capturedMessage(snap))
	return nil
}

// findCapture is the capture of the Pod with UID uid among snaps; nil when there is none.
func findCapture(snaps []snapshotsv1alpha1.SandboxSnapshot, uid any) *snapshotsv1alpha1.SandboxSnapshot {
	for i := range snaps {
		if snaps[i].Labels[snapshotsv1alpha1.SuspendPodUIDLabel] == fmt.Sprint(uid) {
			return &snaps[i]
		}
	}
	return nil
}

// suspendSnapshotName is the capture of pod: one per Pod, so a pass that does not see its own
// create yet finds it by name. The Pod UID's first block tells a Sandbox's Pods apart.
func suspendSnapshotName(sb *agentsv1beta1.Sandbox, pod *corev1.Pod) string {
	uid := string(pod.UID)
	return fmt.Sprintf("%s-rootfs-%s", truncate(sb.Name, 200), uid[:min(8, len(uid))])
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// createCapture creates the SandboxSnapshot of pod's container. One that exists for another Pod,
// or is being deleted, is waited for: the next pass sees what it became.
func (r *Reconciler) createCapture(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, container string) error {
	owner, err := r.ownerRef(sb)
	if err != nil {
		return err
	}
	snap := &snapshotsv1alpha1.SandboxSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name:      suspendSnapshotName(sb, pod),
			Namespace: sb.Namespace,
			Labels: map[string]string{
				agentsv1beta1.SandboxNameHashLabel:   naming.NameHash(sb.Name),
				snapshotsv1alpha1.SuspendPodUIDLabel: string(pod.UID),
			},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: snapshotsv1alpha1.SandboxSnapshotSpec{SandboxName: sb.Name, ContainerName: container},
	}
	err = r.create(ctx, snap, "sandbox snapshot "+snap.Name)
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("creating SandboxSnapshot %q to keep the root filesystem of sandbox %q: %w", snap.Name, sb.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Capturing the root filesystem before suspending", "snapshot", klog.KObj(snap), "pod", klog.KObj(pod))
	return nil
}

// resumeImage gives the Pod about to be created the image of the newest capture, and records
// which one in the RootfsKept condition. A capture named by the resume-from annotation that is
// gone is reported; the Pod then starts from the newest one left, or the template's image.
func resumeImage(sb *agentsv1beta1.Sandbox, pod *corev1.Pod, ro *rootfsObservation) {
	if !ro.on || ro.unavailable {
		return
	}
	snap := latestCapture(ro.snapshots, "")
	if want := sb.Annotations[snapshotsv1alpha1.ResumeFromAnnotation]; want != "" && (snap == nil || snap.Name != want) {
		ro.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsSnapshotMissing,
			"SandboxSnapshot %s, the capture of the last suspension, is gone or not Ready; Pod %s starts from %s", want, pod.Name, resumeSource(snap))
	} else {
		ro.set(metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsRunning, "Pod %s starts from %s", pod.Name, resumeSource(snap))
	}
	if snap == nil {
		return
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == cmp.Or(snap.Spec.ContainerName, rootfsContainer(sb)) {
			pod.Spec.Containers[i].Image = snap.Status.Image
		}
	}
	setResumeFromAnnotation(sb, snap.Name)
}

// resumeSource says where a Pod's root filesystem comes from.
func resumeSource(snap *snapshotsv1alpha1.SandboxSnapshot) string {
	if snap == nil {
		return "the pod template's image"
	}
	return fmt.Sprintf("image %s of SandboxSnapshot %s", snap.Status.Image, snap.Name)
}

// observeRunningRootfs reports, on a pass that did not create the Pod, which image the running
// Pod's root filesystem comes from.
func observeRunningRootfs(sb *agentsv1beta1.Sandbox, pod *corev1.Pod, ro *rootfsObservation) {
	if !ro.on || ro.reason != "" || pod == nil {
		return
	}
	image := ""
	for _, c := range pod.Spec.Containers {
		if c.Name == rootfsContainer(sb) {
			image = c.Image
		}
	}
	for i := range ro.snapshots {
		if s := &ro.snapshots[i]; s.Status.Image != "" && s.Status.Image == image {
			ro.set(metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsRunning, "Pod %s runs %s", pod.Name, resumeSource(s))
			return
		}
	}
	if want := sb.Annotations[snapshotsv1alpha1.ResumeFromAnnotation]; want != "" {
		ro.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsSnapshotMissing,
			"Pod %s runs image %s, not the capture of SandboxSnapshot %s, which is gone or not Ready", pod.Name, image, want)
		return
	}
	ro.set(metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsRunning, "Pod %s runs %s; its root filesystem is captured when the Sandbox is suspended", pod.Name, resumeSource(nil))
}

// pruneCaptures deletes the captures no Pod will start from: all but the newest Ready one, the
// capture of the Pod a suspension is waiting for, and, while the Sandbox runs, the capture of
// its running Pod (which has moved on since). Deleting a snapshot leaves Pods running its
// image untouched.
func (r *Reconciler) pruneCaptures(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, ro *rootfsObservation) error {
	if !ro.on || ro.unavailable {
		return nil
	}
	current := ""
	if pod != nil && pod.DeletionTimestamp.IsZero() {
		current = string(pod.UID)
	}
	// While suspended the current Pod's capture is the newest; while running it is stale.
	skip := current
	if suspended(sb) {
		skip = ""
	}
	keep := latestCapture(ro.snapshots, skip)
	var errs []error
	for i := range ro.snapshots {
		s := &ro.snapshots[i]
		capturesCurrent := current != "" && s.Labels[snapshotsv1alpha1.SuspendPodUIDLabel] == current
		switch {
		case !s.DeletionTimestamp.IsZero(), keep != nil && s.Name == keep.Name, suspended(sb) && capturesCurrent:
			continue
		}
		if err := r.client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting superseded SandboxSnapshot %q of sandbox %q: %w", s.Name, sb.Name, err))
			continue
		}
		ctrl.LoggerFrom(ctx).V(2).Info("Deleted a superseded root filesystem capture", "snapshot", klog.KObj(s))
	}
	return errors.Join(errs...)
}

// setRootfsKept sets the RootfsKept condition on Sandboxes that keep their root filesystem and
// removes it from the others.
func setRootfsKept(sb *agentsv1beta1.Sandbox, obs *observation) {
	ro := &obs.rootfs
	switch {
	case !ro.on:
		meta.RemoveStatusCondition(&sb.Status.Conditions, agentsv1beta1.SandboxConditionRootfsKept)
	case ro.reason != "":
		setCondition(sb, agentsv1beta1.SandboxConditionRootfsKept, ro.status, ro.reason, ro.message)
	case suspended(sb) && obs.pod == nil:
		snap := latestCapture(ro.snapshots, "")
		if snap == nil {
			setCondition(sb, agentsv1beta1.SandboxConditionRootfsKept, metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsNotCaptured,
				"nothing was captured; the next Pod starts from the pod template's image")
			return
		}
		setCondition(sb, agentsv1beta1.SandboxConditionRootfsKept, metav1.ConditionTrue, agentsv1beta1.SandboxReasonRootfsCaptured,
			"the next Pod starts from "+resumeSource(snap))
	}
	// Otherwise (a Pod being replaced, an unknown one) the condition keeps what it said.
}

// setResumeFromAnnotation records the capture the next Pod starts from; the change rides with
// the pass's metadata patch.
func setResumeFromAnnotation(sb *agentsv1beta1.Sandbox, name string) {
	if sb.Annotations == nil {
		sb.Annotations = map[string]string{}
	}
	sb.Annotations[snapshotsv1alpha1.ResumeFromAnnotation] = name
}

// containerStatus is the status of the named container of pod; nil when there is none.
func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// capturedMessage is what a snapshot's Captured condition says.
func capturedMessage(snap *snapshotsv1alpha1.SandboxSnapshot) string {
	c := meta.FindStatusCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionCaptured)
	if c == nil {
		return "waiting for the snapshot controller"
	}
	return c.Reason + ": " + c.Message
}
