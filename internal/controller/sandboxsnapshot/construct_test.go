package sandboxsnapshot

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

func testSnapshot() *snapshotsv1alpha1.SandboxSnapshot {
	return &snapshotsv1alpha1.SandboxSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: "ns", UID: "u-1"},
		Spec:       snapshotsv1alpha1.SandboxSnapshotSpec{SandboxName: "sb"},
	}
}

func twoContainers() extensionsv1beta1.SandboxTemplateSpec {
	return extensionsv1beta1.SandboxTemplateSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
		PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "main", Image: "base:1"}, {Name: "side", Image: "side:1"},
		}}},
	}}
}

// TestConstructTemplate: only the captured container's image changes, the source spec is not
// touched, the source's annotations are kept (the sandboxd runtime among them, without which
// the snapshot's pool members would start unlocked), and the snapshot controls the template.
func TestConstructTemplate(t *testing.T) {
	snap, spec := testSnapshot(), twoContainers()
	source := map[string]string{
		extensionsv1beta1.RuntimeAnnotation:                extensionsv1beta1.RuntimeSandboxd,
		"kubectl.kubernetes.io/last-applied-configuration": "{}",
	}
	tpl, err := constructTemplate(snap, spec, source, "side", "repo/ns/snap@sha256:ab")
	if err != nil {
		t.Fatal(err)
	}
	var images []string
	for _, c := range tpl.Spec.PodTemplate.Spec.Containers {
		images = append(images, c.Image)
	}
	if d := cmp.Diff([]string{"base:1", "repo/ns/snap@sha256:ab"}, images); d != "" {
		t.Errorf("images (-want +got):\n%s", d)
	}
	if spec.PodTemplate.Spec.Containers[1].Image != "side:1" {
		t.Error("the source spec was modified")
	}
	if tpl.Name != "snap" || tpl.Namespace != "ns" || !metav1.IsControlledBy(tpl, snap) {
		t.Errorf("template meta %+v: want ns/snap controlled by the snapshot", tpl.ObjectMeta)
	}
	wantAnnotations := map[string]string{
		extensionsv1beta1.RuntimeAnnotation:  extensionsv1beta1.RuntimeSandboxd,
		snapshotsv1alpha1.SnapshotAnnotation: "snap",
	}
	if d := cmp.Diff(wantAnnotations, tpl.Annotations); d != "" {
		t.Errorf("template annotations (-want +got):\n%s", d)
	}
	if _, err := constructTemplate(snap, spec, nil, "missing", "x"); err == nil || !strings.Contains(err.Error(), `no container "missing"`) {
		t.Errorf("error %v, want the missing container named", err)
	}
}

// TestConstructCapturePod: the Pod is pinned, privileged, without token or ports, and carries
// the spec to publish.
func TestConstructCapturePod(t *testing.T) {
	o, err := Options{Repository: "reg:5000/snaps/", CaptureImage: "cap:1", NodePaths: []string{"/run/c", "/var/lib/c"}}.withDefaults(nil)
	if err != nil {
		t.Fatal(err)
	}
	runtime := map[string]string{extensionsv1beta1.RuntimeAnnotation: extensionsv1beta1.RuntimeSandboxd}
	src := source{nodeName: "n1", containerID: "abc", containerName: "main", baseImage: "base@sha256:1", templateSpec: twoContainers(), templateAnnotations: runtime}
	pod, err := constructCapturePod(testSnapshot(), src, o)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "snapshot-u-1" || pod.Namespace != DefaultNamespace || pod.Spec.NodeName != "n1" || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("pod %s/%s on %q automount %v", pod.Namespace, pod.Name, pod.Spec.NodeName, *pod.Spec.AutomountServiceAccountToken)
	}
	if !strings.Contains(strings.Join(pod.Spec.Containers[0].Args, " "), "--target=reg:5000/snaps/ns/snap:u-1") {
		t.Errorf("args %q lack the target", pod.Spec.Containers[0].Args)
	}
	var mounts []string
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	if d := cmp.Diff([]string{"/run/c", "/var/lib/c", workDir}, mounts); d != "" {
		t.Errorf("mounts (-want +got): want the node paths at the same paths and the work dir\n%s", d)
	}
	if !pod.Spec.HostNetwork || !pod.Spec.HostPID || strings.Contains(strings.Join(pod.Spec.Containers[0].Args, " "), "--runsc") {
		t.Errorf("host network %v, host PID %v, args %q: want both, and no runsc without one configured", pod.Spec.HostNetwork, pod.Spec.HostPID, pod.Spec.Containers[0].Args)
	}
	o.Runsc = "/opt/gvisor/runsc"
	pod, err = constructCapturePod(testSnapshot(), src, o)
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if last := c.VolumeMounts[len(c.VolumeMounts)-1]; !strings.Contains(strings.Join(c.Args, " "), "--runsc=/opt/gvisor/runsc") || last.MountPath != o.Runsc || !last.ReadOnly {
		t.Errorf("args %q, last mount %+v: want runsc passed and mounted read-only at its node path", c.Args, last)
	}
	spec, annotations, err := sourceOf(pod)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(twoContainers(), spec); d != "" {
		t.Errorf("spec read back (-want +got):\n%s", d)
	}
	if d := cmp.Diff(runtime, annotations); d != "" {
		t.Errorf("annotations read back (-want +got):\n%s", d)
	}
}

// TestConstructResumePod: the resume Pod runs on the captured container's node, names only that
// container, and is bounded in time.
func TestConstructResumePod(t *testing.T) {
	o, err := Options{Repository: "reg:5000/snaps", CaptureImage: "cap:1", ContainerdSocket: "/run/c/containerd.sock"}.withDefaults(nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := testSnapshot()
	snap.Status.NodeName, snap.Status.ContainerID = "n1", "abc"
	pod := constructResumePod(snap, o)
	want := []string{"resume", "--containerd-socket=/run/c/containerd.sock", "--container-id=abc"}
	if d := cmp.Diff(want, pod.Spec.Containers[0].Args); d != "" {
		t.Errorf("args (-want +got):\n%s", d)
	}
	if pod.Name != "snapshot-resume-u-1" || pod.Spec.NodeName != "n1" || pod.Spec.ActiveDeadlineSeconds == nil || pod.Labels[snapshotsv1alpha1.SnapshotUIDLabel] != "u-1" {
		t.Errorf("pod %s on %q deadline %v labels %v", pod.Name, pod.Spec.NodeName, pod.Spec.ActiveDeadlineSeconds, pod.Labels)
	}
}
