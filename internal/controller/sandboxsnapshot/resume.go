package sandboxsnapshot

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

// needsResume reports whether snap's capture started and did not end Ready, so that its source
// container may be left paused: a capture resumes it on every error and on SIGTERM, but not
// when it is killed with SIGKILL (OOM, node pressure, a forced deletion).
func needsResume(snap *snapshotsv1alpha1.SandboxSnapshot) bool {
	return snap.Status.CaptureStartTime != nil && snap.Status.ContainerID != "" && snap.Status.NodeName != "" &&
		snap.Status.Phase != snapshotsv1alpha1.SnapshotPhaseReady &&
		!meta.IsStatusConditionTrue(snap.Status.Conditions, snapshotsv1alpha1.ConditionSourceResumed)
}

// guardResume makes sure the source of a capture that ended without success is running: once
// the capture Pod has stopped (a resume before its pause would be undone), a resume Pod on the
// source's node resumes the container; resuming one that is not paused is harmless. It sets the
// SourceResumed condition and reports whether the guard is done.
func (r *Reconciler) guardResume(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) (bool, ctrl.Result, error) {
	if !needsResume(snap) {
		return true, ctrl.Result{}, nil
	}
	pending := func(msg string) (bool, ctrl.Result, error) {
		setCondition(snap, snapshotsv1alpha1.ConditionSourceResumed, metav1.ConditionFalse, snapshotsv1alpha1.ReasonResumePending, msg)
		return false, ctrl.Result{RequeueAfter: r.opts.PollInterval}, nil
	}
	capture, err := r.capturePod(ctx, snap)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	if capture != nil && !podFinished(capture) {
		if err := r.deleteCapturePod(ctx, snap); err != nil {
			return false, ctrl.Result{}, err
		}
		return pending(fmt.Sprintf("waiting for capture Pod %s/%s to stop before resuming container %s", capture.Namespace, capture.Name, snap.Status.ContainerID))
	}
	key := types.NamespacedName{Namespace: r.opts.Namespace, Name: resumePodName(snap)}
	pod := &corev1.Pod{}
	err = r.opts.APIReader.Get(ctx, key, pod)
	switch {
	case apierrors.IsNotFound(err):
		// The resume Pod acts with node privileges on the container the status names: act only
		// on a container of this snapshot's Sandbox, so that a status written by anyone else
		// cannot reach another namespace's container (and a replaced Pod needs no resume).
		if owned, err := r.sourceStillRuns(ctx, snap); err != nil || !owned {
			if err == nil {
				setCondition(snap, snapshotsv1alpha1.ConditionSourceResumed, metav1.ConditionTrue, snapshotsv1alpha1.ReasonSourceGone,
					fmt.Sprintf("container %s is not a container of Sandbox %s's Pod on node %s; nothing to resume", snap.Status.ContainerID, snap.Spec.SandboxName, snap.Status.NodeName))
			}
			return err == nil, ctrl.Result{}, err
		}
		want := constructResumePod(snap, r.opts)
		if err := r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, ctrl.Result{}, fmt.Errorf("creating resume Pod %s: %w", key, err)
		}
		ctrl.LoggerFrom(ctx).Info("Resuming the source of a failed capture", "pod", key, "node", snap.Status.NodeName, "container", snap.Status.ContainerID)
		return pending(fmt.Sprintf("resume Pod %s runs on node %s", key, snap.Status.NodeName))
	case err != nil:
		return false, ctrl.Result{}, fmt.Errorf("reading resume Pod %s: %w", key, err)
	case pod.Labels[snapshotsv1alpha1.SnapshotUIDLabel] != string(snap.UID):
		return false, ctrl.Result{}, fmt.Errorf("pod %s is not the resume Pod of snapshot %s/%s (label %s differs); delete it", key, snap.Namespace, snap.Name, snapshotsv1alpha1.SnapshotUIDLabel)
	case !pod.DeletionTimestamp.IsZero() && pod.Status.Phase != corev1.PodSucceeded:
		// A failed one being deleted: the retry comes once it is gone.
		return false, ctrl.Result{RequeueAfter: r.opts.PollInterval}, nil
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		setCondition(snap, snapshotsv1alpha1.ConditionSourceResumed, metav1.ConditionTrue, snapshotsv1alpha1.ReasonResumed,
			fmt.Sprintf("container %s on node %s is not paused", snap.Status.ContainerID, snap.Status.NodeName))
		return true, ctrl.Result{}, r.deletePod(ctx, key)
	case corev1.PodFailed:
		// The failed Pod stays, for its logs, until the retry: deleting it makes the next pass
		// create a new one.
		if c := meta.FindStatusCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionSourceResumed); c != nil && c.Reason == snapshotsv1alpha1.ReasonResumeFailed {
			if wait := resumeRetryDelay*r.opts.PollInterval - r.opts.Clock.Since(c.LastTransitionTime.Time); wait > 0 {
				return false, ctrl.Result{RequeueAfter: wait}, nil
			}
			return false, ctrl.Result{RequeueAfter: r.opts.PollInterval}, r.deletePod(ctx, key)
		}
		setCondition(snap, snapshotsv1alpha1.ConditionSourceResumed, metav1.ConditionFalse, snapshotsv1alpha1.ReasonResumeFailed,
			fmt.Sprintf("resume Pod %s failed (%s); it is retried: check node %s and `kubectl -n %s logs %s`", key, podOutcome(pod), snap.Status.NodeName, key.Namespace, key.Name))
		return false, ctrl.Result{RequeueAfter: resumeRetryDelay * r.opts.PollInterval}, nil
	}
	return pending(fmt.Sprintf("resume Pod %s is %s on node %s", key, pod.Status.Phase, snap.Status.NodeName))
}

// sourceStillRuns reports whether the container and node in snap's status are those of a
// container of the Pod that snap's Sandbox controls, as the API server has it now.
func (r *Reconciler) sourceStillRuns(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) (bool, error) {
	sb := &agentsv1beta1.Sandbox{}
	if err := r.opts.APIReader.Get(ctx, types.NamespacedName{Namespace: snap.Namespace, Name: snap.Spec.SandboxName}, sb); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	pod := &corev1.Pod{}
	if err := r.opts.APIReader.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: podName(sb)}, pod); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(pod, sb) || pod.Spec.NodeName != snap.Status.NodeName {
		return false, nil
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.ContainerID == containerdScheme+snap.Status.ContainerID {
			return true, nil
		}
	}
	return false, nil
}

// resumeRetryDelay, in poll intervals, is how long a failed resume Pod stays before a new one.
const resumeRetryDelay = 10

// podFinished reports whether no container of pod runs any more.
func podFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// podOutcome says how a finished Pod ended, for a condition message.
func podOutcome(pod *corev1.Pod) string {
	if msg := terminationMessage(pod); msg != "" {
		return msg
	}
	if pod.Status.Reason != "" {
		return pod.Status.Reason + ": " + pod.Status.Message
	}
	return "no message"
}

func (r *Reconciler) deletePod(ctx context.Context, key types.NamespacedName) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := r.client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Pod %s: %w", key, err)
	}
	return nil
}
