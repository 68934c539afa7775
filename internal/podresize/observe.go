package podresize

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// Outcome is what a Pod says of the resize to want: Reason is one of the Sandbox's Resized
// reasons (agentsv1beta1.SandboxReasonResize*), Message says why in words.
type Outcome struct {
	Reason  string
	Message string
}

// Done reports whether the Pod runs with the resources it was asked for.
func (o Outcome) Done() bool { return o.Reason == agentsv1beta1.SandboxReasonResized }

// Observe reads the resize of the Pod's containers to want (by container name, the containers of
// the Sandbox's spec.podTemplate) from the Pod: not sent yet when the Pod's spec differs, the
// kubelet's PodResizePending (Deferred, Infeasible) and PodResizeInProgress conditions, and, once
// they are gone, the resources each container's status reports as applied.
func Observe(pod *corev1.Pod, want []corev1.Container) Outcome {
	if c := Differing(pod, want); c != "" {
		return Outcome{Reason: agentsv1beta1.SandboxReasonResizeInProgress,
			Message: fmt.Sprintf("container %q of Pod %q is being resized", c, pod.Name)}
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch {
		case cond.Type == corev1.PodResizePending && cond.Reason == corev1.PodReasonInfeasible:
			return Outcome{agentsv1beta1.SandboxReasonResizeInfeasible, kubeletSays(pod, "cannot fit the resize on its node", cond.Message)}
		case cond.Type == corev1.PodResizePending:
			return Outcome{agentsv1beta1.SandboxReasonResizeDeferred, kubeletSays(pod, "cannot fit the resize on its node yet", cond.Message)}
		case cond.Type == corev1.PodResizeInProgress && cond.Reason == corev1.PodReasonError:
			return Outcome{agentsv1beta1.SandboxReasonResizeFailed, kubeletSays(pod, "failed to apply the resize", cond.Message)}
		}
	}
	for _, c := range want {
		if container(pod, c.Name) == nil {
			continue
		}
		st := containerStatus(pod, c.Name)
		if st == nil || st.Resources == nil || !Equal(*st.Resources, c.Resources) {
			return Outcome{Reason: agentsv1beta1.SandboxReasonResizeInProgress,
				Message: fmt.Sprintf("waiting for the kubelet to apply the new resources of container %q of Pod %q", c.Name, pod.Name)}
		}
	}
	return Outcome{Reason: agentsv1beta1.SandboxReasonResized, Message: fmt.Sprintf("Pod %q runs with the resources of spec.podTemplate", pod.Name)}
}

// Differing returns the first container of want whose CPU or memory the Pod's spec does not have
// yet, or "".
func Differing(pod *corev1.Pod, want []corev1.Container) string {
	for _, c := range want {
		if pc := container(pod, c.Name); pc != nil && !Equal(pc.Resources, c.Resources) {
			return c.Name
		}
	}
	return ""
}

func kubeletSays(pod *corev1.Pod, what, msg string) string {
	if msg == "" {
		return fmt.Sprintf("the kubelet %s of Pod %q", what, pod.Name)
	}
	return fmt.Sprintf("the kubelet %s of Pod %q: %s", what, pod.Name, msg)
}

func container(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// Resizing reports whether a Sandbox that resizes in place (InPlaceResizeAnnotation) does not
// yet run with the resources of its current generation, and why: its Resized condition is not
// True for that generation. A Sandbox that does not resize in place is never resizing.
func Resizing(sb *agentsv1beta1.Sandbox) (bool, string) {
	if sb.Annotations[agentsv1beta1.InPlaceResizeAnnotation] != "true" {
		return false, ""
	}
	for _, c := range sb.Status.Conditions {
		if c.Type != agentsv1beta1.SandboxConditionResized || c.ObservedGeneration != sb.Generation {
			continue
		}
		if c.Status == "True" {
			return false, ""
		}
		return true, fmt.Sprintf("Sandbox %s/%s is being resized in place: %s", sb.Namespace, sb.Name, c.Message)
	}
	return true, fmt.Sprintf("Sandbox %s/%s is being resized in place", sb.Namespace, sb.Name)
}
