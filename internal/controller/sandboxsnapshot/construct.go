package sandboxsnapshot

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

// sourceSpecAnnotation on a capture Pod carries the JSON of the template spec to publish.
const sourceSpecAnnotation = "snapshots.paddock.dev/source-spec"

// captureContainerName is the capture Pod's only container.
const captureContainerName = "capture"

// source is what the controller observed of the Sandbox to capture.
type source struct {
	nodeName      string
	containerID   string // without the "containerd://" scheme
	containerName string
	runtimeClass  string
	baseImage     string // the image the container runs, by digest when the node reports one
	templateSpec  extensionsv1beta1.SandboxTemplateSpec
}

// capturePodName is the capture Pod of snap in the controller's namespace.
func capturePodName(snap *snapshotsv1alpha1.SandboxSnapshot) string {
	return "snapshot-" + string(snap.UID)
}

// target is the repository and tag the capture pushes to: one repository per snapshot, under
// its namespace, so that the registry path says whose it is.
func target(repository string, snap *snapshotsv1alpha1.SandboxSnapshot) string {
	return fmt.Sprintf("%s/%s/%s:%s", strings.TrimSuffix(repository, "/"), snap.Namespace, snap.Name, snap.UID)
}

// templateName is the SandboxTemplate snap publishes.
func templateName(snap *snapshotsv1alpha1.SandboxSnapshot) string {
	if snap.Spec.TemplateName != "" {
		return snap.Spec.TemplateName
	}
	return snap.Name
}

// constructCapturePod builds the Pod that captures src on its node. It is privileged (it pauses
// a container and reads its files through containerd), has no ports and no service account
// token: only its command line, written by the controller, tells it what to do.
func constructCapturePod(snap *snapshotsv1alpha1.SandboxSnapshot, src source, o Options) (*corev1.Pod, error) {
	spec, err := json.Marshal(src.templateSpec)
	if err != nil {
		return nil, fmt.Errorf("encoding the source template spec: %w", err)
	}
	args := []string{
		"capture",
		"--containerd-socket=" + o.ContainerdSocket,
		"--container-id=" + src.containerID,
		"--base-image=" + src.baseImage,
		"--target=" + target(o.Repository, snap),
		"--runtime-class=" + src.runtimeClass,
	}
	if o.InsecureRegistry {
		args = append(args, "--insecure-registry")
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      capturePodName(snap),
			Namespace: o.Namespace,
			Labels: map[string]string{
				snapshotsv1alpha1.SnapshotUIDLabel: string(snap.UID),
				"app.kubernetes.io/name":           "paddock-snapshot-capture",
			},
			Annotations: map[string]string{
				snapshotsv1alpha1.SnapshotNamespaceAnnotation: snap.Namespace,
				snapshotsv1alpha1.SnapshotNameAnnotation:      snap.Name,
				snapshotsv1alpha1.SnapshotContainerAnnotation: src.containerName,
				sourceSpecAnnotation:                          string(spec),
			},
		},
		Spec: corev1.PodSpec{
			NodeName:                     src.nodeName,
			RestartPolicy:                corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:        ptr.To(int64(o.CaptureTimeout.Seconds())),
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			// The source's node may be tainted for sandboxes; the capture must run there anyway.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:                     captureContainerName,
				Image:                    o.CaptureImage,
				Args:                     args,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				SecurityContext:          &corev1.SecurityContext{Privileged: ptr.To(true)},
			}},
		},
	}
	for i, p := range o.NodePaths {
		name := fmt.Sprintf("node-%d", i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: p, Type: ptr.To(corev1.HostPathDirectory)},
		}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{
			Name: name, MountPath: p, MountPropagation: ptr.To(corev1.MountPropagationHostToContainer),
		})
	}
	return pod, nil
}

// sourceSpecOf reads back the template spec a capture Pod carries.
func sourceSpecOf(pod *corev1.Pod) (extensionsv1beta1.SandboxTemplateSpec, error) {
	var spec extensionsv1beta1.SandboxTemplateSpec
	raw, ok := pod.Annotations[sourceSpecAnnotation]
	if !ok {
		return spec, fmt.Errorf("capture Pod %s/%s lacks the annotation %s", pod.Namespace, pod.Name, sourceSpecAnnotation)
	}
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return spec, fmt.Errorf("capture Pod %s/%s: annotation %s: %w", pod.Namespace, pod.Name, sourceSpecAnnotation, err)
	}
	return spec, nil
}

// constructTemplate is the SandboxTemplate snap publishes: spec with the captured container
// running image, controlled by snap.
func constructTemplate(snap *snapshotsv1alpha1.SandboxSnapshot, spec extensionsv1beta1.SandboxTemplateSpec, container, image string) (*extensionsv1beta1.SandboxTemplate, error) {
	spec = *spec.DeepCopy()
	found := false
	for i := range spec.PodTemplate.Spec.Containers {
		if spec.PodTemplate.Spec.Containers[i].Name == container {
			spec.PodTemplate.Spec.Containers[i].Image = image
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("the source spec has no container %q", container)
	}
	return &extensionsv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{
			Name:            templateName(snap),
			Namespace:       snap.Namespace,
			Annotations:     map[string]string{snapshotsv1alpha1.SnapshotAnnotation: snap.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(snap, snapshotsv1alpha1.GroupVersion.WithKind("SandboxSnapshot"))},
		},
		Spec: spec,
	}, nil
}
