package sandboxsnapshot

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

func statusOf(s *snapshotsv1alpha1.SandboxSnapshot) any { return s.Status }

func setCondition(snap *snapshotsv1alpha1.SandboxSnapshot, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&snap.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: snap.Generation,
	})
}

// setWaiting keeps snap Pending, saying why.
func setWaiting(snap *snapshotsv1alpha1.SandboxSnapshot, reason, msg string) {
	snap.Status.Phase = snapshotsv1alpha1.SnapshotPhasePending
	setCondition(snap, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, reason, msg)
}

// setCapturing marks the capture Pod as running.
func setCapturing(snap *snapshotsv1alpha1.SandboxSnapshot, msg string) {
	snap.Status.Phase = snapshotsv1alpha1.SnapshotPhaseCapturing
	setCondition(snap, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureRunning, msg)
}

// setFailed ends snap: it is never Ready after this.
func setFailed(snap *snapshotsv1alpha1.SandboxSnapshot, now metav1.Time, reason, msg string) {
	snap.Status.Phase = snapshotsv1alpha1.SnapshotPhaseFailed
	snap.Status.CompletionTime = &now
	setCondition(snap, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, reason, msg)
	setCondition(snap, snapshotsv1alpha1.ConditionTemplateReady, metav1.ConditionFalse, reason, "nothing to publish: the capture failed")
}

// setCaptured records the stored image.
func setCaptured(snap *snapshotsv1alpha1.SandboxSnapshot, now metav1.Time, image string, size, pausedMillis int64) {
	snap.Status.Phase = snapshotsv1alpha1.SnapshotPhaseReady
	snap.Status.CompletionTime = &now
	snap.Status.Image = image
	snap.Status.SizeBytes = &size
	snap.Status.PausedMilliseconds = &pausedMillis
	setCondition(snap, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionTrue, snapshotsv1alpha1.ReasonCaptured, "stored as "+image)
}

func setTemplateReady(snap *snapshotsv1alpha1.SandboxSnapshot, status metav1.ConditionStatus, reason, msg string) {
	setCondition(snap, snapshotsv1alpha1.ConditionTemplateReady, status, reason, msg)
}

// setReady derives Ready from Captured and TemplateReady; the first that is not True gives the
// reason. TemplateReady is Unknown until the capture is done.
func setReady(snap *snapshotsv1alpha1.SandboxSnapshot) {
	if meta.FindStatusCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionTemplateReady) == nil {
		setTemplateReady(snap, metav1.ConditionUnknown, snapshotsv1alpha1.ReasonTemplatePending, "published once the capture is stored")
	}
	for _, typ := range []string{snapshotsv1alpha1.ConditionCaptured, snapshotsv1alpha1.ConditionTemplateReady} {
		c := meta.FindStatusCondition(snap.Status.Conditions, typ)
		if c == nil {
			setCondition(snap, snapshotsv1alpha1.ConditionReady, metav1.ConditionUnknown, snapshotsv1alpha1.ReasonTemplatePending, typ+" not observed yet")
			return
		}
		if c.Status != metav1.ConditionTrue {
			setCondition(snap, snapshotsv1alpha1.ConditionReady, metav1.ConditionFalse, c.Reason, c.Message)
			return
		}
	}
	setCondition(snap, snapshotsv1alpha1.ConditionReady, metav1.ConditionTrue, snapshotsv1alpha1.ReasonReady,
		"SandboxTemplate "+snap.Status.TemplateName+" starts Sandboxes from "+snap.Status.Image)
}
