package snapshots

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestCaptureVolumes: the capture Pod is asked for the Sandbox's own state only (the
// volumeClaimTemplate its container mounts whole; no emptyDir, Secret, subPath mount or
// unmounted claim), the Ready snapshot lists Volumes and the volume, and a Sandbox of the
// published template (a warm pool member) gets a Pod whose restore init container runs the
// snapshot image with no environment, no token, a read-only root filesystem and only the
// volume it fills, which is that Sandbox's own new PVC.
func TestCaptureVolumes(t *testing.T) {
	ns := env.Namespace(t)
	sb := builder.MakeSandbox("sb", ns).VolumeClaim("data", "1Gi").VolumeClaim("part", "1Gi").VolumeClaim("unused", "1Gi").Obj()
	ps := &sb.Spec.PodTemplate.Spec
	ps.Volumes = append(ps.Volumes,
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}})
	ps.Containers[0].VolumeMounts = append(ps.Containers[0].VolumeMounts,
		corev1.VolumeMount{Name: "scratch", MountPath: "/tmp"},
		corev1.VolumeMount{Name: "creds", MountPath: "/var/run/creds", ReadOnly: true},
		corev1.VolumeMount{Name: "part", MountPath: "/part", SubPath: "x"},
		corev1.VolumeMount{Name: "data", MountPath: "/home/user/data"})
	runSandbox(t, sb)

	create(t, builder.MakeSnapshot("snap", ns, "sb").Obj())
	snap := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseCapturing, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureRunning)
	pod := capturePod(t, snap)
	var volumeArgs []string
	for _, a := range pod.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--volume") {
			volumeArgs = append(volumeArgs, a)
		}
	}
	if d := cmp.Diff([]string{"--volume=data=/home/user/data"}, volumeArgs); d != "" {
		t.Errorf("capture Pod's volume arguments (-want +got):\n%s", d)
	}
	// The node's root is mounted read-only, where the capture resolves the volume's host path.
	if !slices.Contains(pod.Spec.Containers[0].Args, "--host-root=/host") ||
		!slices.ContainsFunc(pod.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/host" && m.ReadOnly }) {
		t.Errorf("capture Pod args %v mounts %v: want the node's root read-only at /host", pod.Spec.Containers[0].Args, pod.Spec.Containers[0].VolumeMounts)
	}
	finishCapture(t, pod, corev1.PodSucceeded, snapshot.Result{Image: snapImage, SizeBytes: 4096, PausedMilliseconds: 12})
	snap = waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseReady, snapshotsv1alpha1.ConditionReady, metav1.ConditionTrue, snapshotsv1alpha1.ReasonReady)
	if d := cmp.Diff([]snapshotsv1alpha1.SnapshotContent{snapshotsv1alpha1.SnapshotContentFilesystem, snapshotsv1alpha1.SnapshotContentVolumes}, snap.Status.Contents); d != "" {
		t.Errorf("status.contents (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"data"}, snap.Status.Volumes); d != "" {
		t.Errorf("status.volumes (-want +got):\n%s", d)
	}

	create(t, builder.MakeWarmPool("fork", ns, snap.Status.TemplateName).Replicas(1).Obj())
	var member corev1.Pod
	framework.Eventually(t, func(ctx context.Context) error {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Name != "sb" {
				member = p
				return nil
			}
		}
		return fmt.Errorf("no Pod of the pool's member yet (%d Pods)", len(pods.Items))
	})
	ic := slices.IndexFunc(member.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == "paddock-restore-volumes" })
	if ic < 0 {
		t.Fatalf("member Pod %s has init containers %v, want the restore", member.Name, member.Spec.InitContainers)
	}
	c := member.Spec.InitContainers[ic]
	if c.Image != snapImage || len(c.Env) != 0 || len(c.EnvFrom) != 0 {
		t.Errorf("restore container runs %q with env %v %v; want the snapshot image and no environment", c.Image, c.Env, c.EnvFrom)
	}
	if sc := c.SecurityContext; sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) || ptr.Deref(sc.Privileged, false) {
		t.Errorf("restore container security context %+v; want a read-only root, no escalation, not privileged", sc)
	}
	if ptr.Deref(member.Spec.AutomountServiceAccountToken, true) {
		t.Errorf("member Pod mounts the service account token")
	}
	var mounts []string
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.Name+"="+m.MountPath)
	}
	if d := cmp.Diff([]string{"paddock-restore-no-token=/var/run/secrets/kubernetes.io/serviceaccount", "data=/paddock-restore/data"}, mounts); d != "" {
		t.Errorf("restore container mounts (-want +got):\n%s", d)
	}
	for _, v := range member.Spec.Volumes {
		if v.Name == "data" && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName == "data-sb") {
			t.Errorf("member Pod's volume data is %+v; want a PVC of its own, not the source's", v.VolumeSource)
		}
	}
}

// TestSuspendCaptureHoldsNoVolumes: a suspension's capture keeps the root filesystem only: the
// Sandbox keeps its volumes, so the capture asks for none and lists none.
func TestSuspendCaptureHoldsNoVolumes(t *testing.T) {
	ns := env.Namespace(t)
	sb := keepingSandbox(ns)
	sb.Spec.VolumeClaimTemplates = builder.MakeSandbox("x", ns).VolumeClaim("data", "1Gi").Obj().Spec.VolumeClaimTemplates
	sb.Spec.PodTemplate.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	runSandbox(t, sb)
	setMode(t, ns, "Suspended")
	snap, pod := suspendCapture(t, ns)
	cp := capturePod(t, snap)
	for _, a := range cp.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--volume") {
			t.Errorf("suspension capture of Pod %s asks for %s", pod.Name, a)
		}
	}
	if len(snap.Status.Volumes) != 0 || slices.Contains(snap.Status.Contents, snapshotsv1alpha1.SnapshotContentVolumes) {
		t.Errorf("suspension capture lists contents %v volumes %v; want the filesystem only", snap.Status.Contents, snap.Status.Volumes)
	}
}
