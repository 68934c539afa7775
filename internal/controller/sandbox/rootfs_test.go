package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

func capture(name, podUID string, phase snapshotsv1alpha1.SnapshotPhase, completed int) snapshotsv1alpha1.SandboxSnapshot {
	s := snapshotsv1alpha1.SandboxSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{snapshotsv1alpha1.SuspendPodUIDLabel: podUID}},
		Spec:       snapshotsv1alpha1.SandboxSnapshotSpec{SandboxName: "sb", ContainerName: "main"},
		Status:     snapshotsv1alpha1.SandboxSnapshotStatus{Phase: phase},
	}
	if phase == snapshotsv1alpha1.SnapshotPhaseReady {
		s.Status.Image = "reg/" + name + "@sha256:1"
		at := metav1.NewTime(time.Unix(int64(completed), 0))
		s.Status.CompletionTime = &at
	}
	return s
}

// TestLatestCapture: the newest Ready capture wins, failed and running ones never do, and the
// capture of a Pod that keeps running is skipped when asked.
func TestLatestCapture(t *testing.T) {
	ready1 := capture("a", "pod-1", snapshotsv1alpha1.SnapshotPhaseReady, 10)
	ready2 := capture("b", "pod-2", snapshotsv1alpha1.SnapshotPhaseReady, 20)
	failed := capture("c", "pod-3", snapshotsv1alpha1.SnapshotPhaseFailed, 30)
	running := capture("d", "pod-4", snapshotsv1alpha1.SnapshotPhaseCapturing, 40)
	for _, tt := range []struct {
		name  string
		snaps []snapshotsv1alpha1.SandboxSnapshot
		skip  string
		want  string
	}{
		{name: "none", want: ""},
		{name: "newest ready", snaps: []snapshotsv1alpha1.SandboxSnapshot{ready2, failed, ready1, running}, want: "b"},
		{name: "skips the running pod's", snaps: []snapshotsv1alpha1.SandboxSnapshot{ready1, ready2}, skip: "pod-2", want: "a"},
		{name: "only unfinished", snaps: []snapshotsv1alpha1.SandboxSnapshot{failed, running}, want: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if s := latestCapture(tt.snaps, tt.skip); s != nil {
				got = s.Name
			}
			if got != tt.want {
				t.Errorf("latestCapture = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestResumeImage: the Pod about to be created runs the newest capture's image in the captured
// container and nothing else changes (its env, with the tokens by reference, stays); a capture
// named by the resume-from annotation that is gone is reported as SnapshotMissing.
func TestResumeImage(t *testing.T) {
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb"}}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: "base"}, {Name: "side", Image: "side"}}
	env := []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "t"}}}}
	newPod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sb"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "main", Image: "base", Env: env}, {Name: "side", Image: "side"},
		}}}
	}
	for _, tt := range []struct {
		name       string
		resumeFrom string
		snaps      []snapshotsv1alpha1.SandboxSnapshot
		wantImage  string
		wantReason string
	}{
		{name: "no capture", wantImage: "base", wantReason: agentsv1beta1.SandboxReasonRootfsRunning},
		{name: "newest capture", resumeFrom: "b", snaps: []snapshotsv1alpha1.SandboxSnapshot{
			capture("a", "p1", snapshotsv1alpha1.SnapshotPhaseReady, 1), capture("b", "p2", snapshotsv1alpha1.SnapshotPhaseReady, 2),
		}, wantImage: "reg/b@sha256:1", wantReason: agentsv1beta1.SandboxReasonRootfsRunning},
		{name: "named capture gone", resumeFrom: "c", snaps: []snapshotsv1alpha1.SandboxSnapshot{
			capture("a", "p1", snapshotsv1alpha1.SnapshotPhaseReady, 1),
		}, wantImage: "reg/a@sha256:1", wantReason: agentsv1beta1.SandboxReasonRootfsSnapshotMissing},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sb := sb.DeepCopy()
			sb.Annotations = map[string]string{snapshotsv1alpha1.ResumeFromAnnotation: tt.resumeFrom}
			pod := newPod()
			ro := &rootfsObservation{on: true, snapshots: tt.snaps}
			resumeImage(sb, pod, ro)
			want := newPod()
			want.Spec.Containers[0].Image = tt.wantImage
			if d := cmp.Diff(want, pod); d != "" {
				t.Errorf("pod (-want +got):\n%s", d)
			}
			if ro.reason != tt.wantReason {
				t.Errorf("reason %q (%s), want %q", ro.reason, ro.message, tt.wantReason)
			}
		})
	}
}
