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
// touched, and the snapshot controls the template.
func TestConstructTemplate(t *testing.T) {
	snap, spec := testSnapshot(), twoContainers()
	tpl, err := constructTemplate(snap, spec, "side", "repo/ns/snap@sha256:ab")
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
	if tpl.Name != "snap" || tpl.Namespace != "ns" || !metav1.IsControlledBy(tpl, snap) || tpl.Annotations[snapshotsv1alpha1.SnapshotAnnotation] != "snap" {
		t.Errorf("template meta %+v: want ns/snap controlled by the snapshot and naming it", tpl.ObjectMeta)
	}
	if _, err := constructTemplate(snap, spec, "missing", "x"); err == nil || !strings.Contains(err.Error(), `no container "missing"`) {
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
	src := source{nodeName: "n1", containerID: "abc", containerName: "main", baseImage: "base@sha256:1", templateSpec: twoContainers()}
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
	if len(pod.Spec.Volumes) != 2 || pod.Spec.Containers[0].VolumeMounts[1].MountPath != "/var/lib/c" {
		t.Errorf("volumes %+v: want the node paths at the same paths", pod.Spec.Volumes)
	}
	spec, err := sourceSpecOf(pod)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(twoContainers(), spec); d != "" {
		t.Errorf("spec read back (-want +got):\n%s", d)
	}
}
