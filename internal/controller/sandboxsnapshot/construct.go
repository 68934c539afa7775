package sandboxsnapshot

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/snapshot"
)

// sourceSpecAnnotation on a capture Pod carries the JSON of the template spec to publish.
const sourceSpecAnnotation = "snapshots.paddock.dev/source-spec"

// sourceAnnotationsAnnotation on a capture Pod carries the JSON of the source template's
// annotations, which the published template keeps: they say how its Sandboxes run (the
// sandboxd runtime, which locks unclaimed members and carries claim settings; idle and warm
// resource policies). Absent when the source had none.
const sourceAnnotationsAnnotation = "snapshots.paddock.dev/source-annotations"

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
	// templateAnnotations are the source template's annotations (none for a Sandbox made
	// without a template), minus what only describes that object.
	templateAnnotations map[string]string
	// volumes are captured with the root filesystem (volumesToCapture).
	volumes []snapshot.Volume
}

// capturePodName is the capture Pod of snap in the controller's namespace.
func capturePodName(snap *snapshotsv1alpha1.SandboxSnapshot) string {
	return "snapshot-" + string(snap.UID)
}

// resumePodName is the resume Pod of snap in the controller's namespace.
func resumePodName(snap *snapshotsv1alpha1.SandboxSnapshot) string {
	return "snapshot-resume-" + string(snap.UID)
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
// a container and reads its files through containerd, or through runsc under gVisor), has no
// ports and no service account token: only its command line, written by the controller, tells
// it what to do. It shares the node's network, so that it pushes to the registry the node pulls
// from (a loopback registry included), and the node's PID namespace, which runsc needs to reach
// a gVisor sandbox.
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
		"--work-dir=" + workDir,
	}
	if o.InsecureRegistry {
		args = append(args, "--insecure-registry")
	}
	if o.Runsc != "" {
		args = append(args, "--runsc="+o.Runsc)
	}
	for _, v := range src.volumes {
		args = append(args, "--volume="+v.Name+"="+v.MountPath)
	}
	if len(src.volumes) > 0 {
		args = append(args, "--host-root="+hostRootDir)
	}
	pod := nodePod(capturePodName(snap), "paddock-snapshot-capture", snap, src.nodeName, o, args)
	pod.Annotations = map[string]string{
		snapshotsv1alpha1.SnapshotNamespaceAnnotation: snap.Namespace,
		snapshotsv1alpha1.SnapshotNameAnnotation:      snap.Name,
		snapshotsv1alpha1.SnapshotContainerAnnotation: src.containerName,
		sourceSpecAnnotation:                          string(spec),
	}
	if len(src.templateAnnotations) > 0 {
		annotations, err := json.Marshal(src.templateAnnotations)
		if err != nil {
			return nil, fmt.Errorf("encoding the source template's annotations: %w", err)
		}
		pod.Annotations[sourceAnnotationsAnnotation] = string(annotations)
	}
	pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(o.CaptureTimeout.Seconds()))
	pod.Spec.HostPID = true
	// The layer is written here while it is pushed; the capture image has no writable /tmp.
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "work", MountPath: workDir})
	if len(src.volumes) > 0 {
		// The volumes' host directories are under the node's root, read-only; the capture
		// resolves each inside it. /proc/1/root would need ptrace access to the node's init,
		// which some nodes (a VM whose init is not dumpable) refuse.
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "host-root", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/", Type: ptr.To(corev1.HostPathDirectory)},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "host-root", MountPath: hostRootDir, ReadOnly: true})
	}
	if o.Runsc != "" {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "runsc", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: o.Runsc, Type: ptr.To(corev1.HostPathFile)},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "runsc", MountPath: o.Runsc, ReadOnly: true})
	}
	return pod, nil
}

// hostRootDir is where a capture Pod that reads volumes mounts the node's root.
const hostRootDir = "/host"

// workDir is the capture Pod's scratch directory (an emptyDir).
const workDir = "/work"

// imageDeletePodName is the image delete Pod of snap in the controller's namespace.
func imageDeletePodName(snap *snapshotsv1alpha1.SandboxSnapshot) string {
	return "snapshot-delete-" + string(snap.UID)
}

// constructImageDeletePod deletes snap's image from the registry on the node that pushed it, on
// the node's network: the registry may be one only nodes reach (the dev registry is on the
// node's loopback). It needs no privilege and no node path.
func constructImageDeletePod(snap *snapshotsv1alpha1.SandboxSnapshot, o Options) *corev1.Pod {
	args := []string{"delete", "--image=" + snap.Status.Image, "--tag=" + string(snap.UID), "--timeout=" + o.ImageDeleteTimeout.String()}
	if o.InsecureRegistry {
		args = append(args, "--insecure-registry")
	}
	pod := nodePod(imageDeletePodName(snap), "paddock-snapshot-delete", snap, snap.Status.NodeName, Options{Namespace: o.Namespace, CaptureImage: o.CaptureImage}, args)
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(false), AllowPrivilegeEscalation: ptr.To(false)}
	pod.Spec.ActiveDeadlineSeconds = ptr.To(int64((o.ImageDeleteTimeout + imageDeleteGrace).Seconds()))
	return pod
}

// imageDeleteGrace is how long past ImageDeleteTimeout an image delete Pod may take to start
// and report before the controller gives up on it (its node may be gone).
const imageDeleteGrace = time.Minute

// resumeDeadline bounds a resume Pod: one containerd call once it runs.
const resumeDeadline = 2 * time.Minute

// constructResumePod builds the Pod that resumes the source container of snap on its node, in
// case a capture was killed between its pause and its resume. Same binary and access as the
// capture, with nothing to read or push.
func constructResumePod(snap *snapshotsv1alpha1.SandboxSnapshot, o Options) *corev1.Pod {
	args := []string{"resume", "--containerd-socket=" + o.ContainerdSocket, "--container-id=" + snap.Status.ContainerID}
	pod := nodePod(resumePodName(snap), "paddock-snapshot-resume", snap, snap.Status.NodeName, o, args)
	pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(resumeDeadline.Seconds()))
	return pod
}

// nodePod is a privileged Pod on node running the capture image with args, with the node paths
// mounted at the same paths, labelled with snap's UID.
func nodePod(name, app string, snap *snapshotsv1alpha1.SandboxSnapshot, node string, o Options, args []string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: o.Namespace,
			Labels: map[string]string{
				snapshotsv1alpha1.SnapshotUIDLabel: string(snap.UID),
				"app.kubernetes.io/name":           app,
			},
		},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			HostNetwork:                  true,
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
		vol := fmt.Sprintf("node-%d", i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: p, Type: ptr.To(corev1.HostPathDirectory)},
		}})
		// No mount propagation: what is read there are files, not mounts, and HostToContainer
		// fails the container where the node's / is not a shared mount.
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: p})
	}
	return pod
}

// sourceOf reads back the template spec and annotations a capture Pod carries.
func sourceOf(pod *corev1.Pod) (extensionsv1beta1.SandboxTemplateSpec, map[string]string, error) {
	var spec extensionsv1beta1.SandboxTemplateSpec
	raw, ok := pod.Annotations[sourceSpecAnnotation]
	if !ok {
		return spec, nil, fmt.Errorf("capture Pod %s/%s lacks the annotation %s", pod.Namespace, pod.Name, sourceSpecAnnotation)
	}
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return spec, nil, fmt.Errorf("capture Pod %s/%s: annotation %s: %w", pod.Namespace, pod.Name, sourceSpecAnnotation, err)
	}
	var annotations map[string]string
	if raw, ok := pod.Annotations[sourceAnnotationsAnnotation]; ok {
		if err := json.Unmarshal([]byte(raw), &annotations); err != nil {
			return spec, nil, fmt.Errorf("capture Pod %s/%s: annotation %s: %w", pod.Namespace, pod.Name, sourceAnnotationsAnnotation, err)
		}
	}
	return spec, annotations, nil
}

// carriedAnnotations is what of a source template's annotations its snapshot's template keeps:
// all but kubectl's bookkeeping, which describes the source object, not how it runs.
func carriedAnnotations(annotations map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range annotations {
		if !strings.HasPrefix(k, "kubectl.kubernetes.io/") {
			out[k] = v
		}
	}
	return out
}

// constructTemplate is the SandboxTemplate snap publishes: spec with the captured container
// running image and the source template's annotations, controlled by snap.
func constructTemplate(snap *snapshotsv1alpha1.SandboxSnapshot, spec extensionsv1beta1.SandboxTemplateSpec, annotations map[string]string, container, image string) (*extensionsv1beta1.SandboxTemplate, error) {
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
	withRestore(&spec.PodTemplate.Spec, image, snap.Status.Volumes)
	kept := carriedAnnotations(annotations)
	kept[snapshotsv1alpha1.SnapshotAnnotation] = snap.Name
	return &extensionsv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{
			Name:            templateName(snap),
			Namespace:       snap.Namespace,
			Annotations:     kept,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(snap, snapshotsv1alpha1.GroupVersion.WithKind("SandboxSnapshot"))},
		},
		Spec: spec,
	}, nil
}
