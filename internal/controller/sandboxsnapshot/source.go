package sandboxsnapshot

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

// problem is why a source cannot be captured now; terminal ones fail the snapshot.
type problem struct {
	reason, message string
	terminal        bool
}

const containerdScheme = "containerd://"

// observeSource finds the Sandbox, its Pod and the running container to capture. Reads go to
// the API server: a snapshot is often created right after its Sandbox, before the cache has it.
func (r *Reconciler) observeSource(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) (source, *problem, error) {
	key := types.NamespacedName{Namespace: snap.Namespace, Name: snap.Spec.SandboxName}
	sb := &agentsv1beta1.Sandbox{}
	if err := r.opts.APIReader.Get(ctx, key, sb); err != nil {
		if apierrors.IsNotFound(err) {
			return source{}, &problem{snapshotsv1alpha1.ReasonSandboxNotFound,
				fmt.Sprintf("Sandbox %s not found; spec.sandboxName must name a Sandbox in namespace %s", key.Name, key.Namespace), true}, nil
		}
		return source{}, nil, fmt.Errorf("reading Sandbox %s: %w", key, err)
	}
	container := snap.Spec.ContainerName
	if container == "" && len(sb.Spec.PodTemplate.Spec.Containers) > 0 {
		container = sb.Spec.PodTemplate.Spec.Containers[0].Name
	}
	if !hasContainer(sb.Spec.PodTemplate.Spec, container) {
		return source{}, &problem{snapshotsv1alpha1.ReasonContainerNotFound,
			fmt.Sprintf("Sandbox %s has no container %q; set spec.containerName to one of its containers", key.Name, container), true}, nil
	}
	suspending := suspendCaptureOf(snap, sb)
	if !suspending && !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
		return source{}, &problem{reason: snapshotsv1alpha1.ReasonSandboxNotReady, message: fmt.Sprintf("Sandbox %s is not Ready", key.Name)}, nil
	}
	pod := &corev1.Pod{}
	podKey := types.NamespacedName{Namespace: sb.Namespace, Name: podName(sb)}
	if err := r.opts.APIReader.Get(ctx, podKey, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return source{}, &problem{reason: snapshotsv1alpha1.ReasonSandboxNotReady, message: fmt.Sprintf("Pod %s of Sandbox %s not found", podKey.Name, key.Name)}, nil
		}
		return source{}, nil, fmt.Errorf("reading Pod %s: %w", podKey, err)
	}
	if !metav1.IsControlledBy(pod, sb) {
		return source{}, &problem{snapshotsv1alpha1.ReasonSandboxNotReady,
			fmt.Sprintf("Pod %s is not controlled by Sandbox %s", podKey.Name, key.Name), true}, nil
	}
	if uid := snap.Labels[snapshotsv1alpha1.SuspendPodUIDLabel]; suspending && string(pod.UID) != uid {
		return source{}, &problem{snapshotsv1alpha1.ReasonSandboxNotReady,
			fmt.Sprintf("Pod %s is not the Pod this suspension captures (UID %s); the Sandbox controller makes a new capture", podKey.Name, uid), true}, nil
	}
	src := source{nodeName: pod.Spec.NodeName, containerName: container, runtimeClass: ptr.Deref(pod.Spec.RuntimeClassName, "")}
	status := containerStatus(pod, container)
	if status == nil || status.State.Running == nil || !strings.HasPrefix(status.ContainerID, containerdScheme) || src.nodeName == "" {
		return source{}, &problem{reason: snapshotsv1alpha1.ReasonSandboxNotReady,
			message: fmt.Sprintf("container %q of Pod %s is not running under containerd", container, podKey.Name)}, nil
	}
	if !suspending {
		// A suspension keeps the Sandbox's volumes: only the root filesystem is captured.
		src.volumes = volumesToCapture(sb, container)
	}
	src.containerID = strings.TrimPrefix(status.ContainerID, containerdScheme)
	src.baseImage = status.ImageID
	if !strings.Contains(src.baseImage, "@sha256:") {
		src.baseImage = status.Image
	}
	tpl, p, err := r.templateOf(ctx, sb)
	if err != nil || p != nil {
		return source{}, p, err
	}
	src.templateSpec, src.templateAnnotations = tpl.Spec, carriedAnnotations(tpl.Annotations)
	return src, nil, nil
}

// templateOf is the template the snapshot's template starts from: the Sandbox's own template
// when it was made from one, so that a claim's env (which may hold secrets) never reaches the
// published template, else one with the Sandbox's blueprint and no annotations.
func (r *Reconciler) templateOf(ctx context.Context, sb *agentsv1beta1.Sandbox) (*extensionsv1beta1.SandboxTemplate, *problem, error) {
	name := sb.Annotations[agentsv1beta1.SandboxTemplateRefAnnotation]
	if name == "" {
		return &extensionsv1beta1.SandboxTemplate{Spec: extensionsv1beta1.SandboxTemplateSpec{SandboxBlueprint: *sb.Spec.SandboxBlueprint.DeepCopy()}}, nil, nil
	}
	tpl := &extensionsv1beta1.SandboxTemplate{}
	if err := r.opts.APIReader.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: name}, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &problem{snapshotsv1alpha1.ReasonSourceTemplateNotFound,
				fmt.Sprintf("Sandbox %s was made from SandboxTemplate %s, which no longer exists; recreate it to snapshot the Sandbox", sb.Name, name), true}, nil
		}
		return nil, nil, fmt.Errorf("reading SandboxTemplate %s/%s: %w", sb.Namespace, name, err)
	}
	return tpl, nil, nil
}

// podName is the Sandbox's Pod: the pod-name annotation when set, else the Sandbox's name.
func podName(sb *agentsv1beta1.Sandbox) string {
	if name := sb.Annotations[agentsv1beta1.PodNameAnnotation]; name != "" {
		return name
	}
	return sb.Name
}

func hasContainer(spec corev1.PodSpec, name string) bool {
	for _, c := range spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func findCaptured(snap *snapshotsv1alpha1.SandboxSnapshot) *metav1.Condition {
	return meta.FindStatusCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionCaptured)
}

// suspendCaptureOf reports whether snap is the capture the Sandbox controller made of sb's Pod
// before deleting it (snapshots.paddock.dev/suspend: rootfs): such a capture runs while sb is
// Suspended, and so not Ready, as long as the Pod it names still runs.
func suspendCaptureOf(snap *snapshotsv1alpha1.SandboxSnapshot, sb *agentsv1beta1.Sandbox) bool {
	return snap.Labels[snapshotsv1alpha1.SuspendPodUIDLabel] != "" && metav1.IsControlledBy(snap, sb) &&
		sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended
}
