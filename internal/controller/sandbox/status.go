package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/imageconfig"
	"github.com/paddock-dev/paddock/internal/podadmission"
	"github.com/paddock-dev/paddock/internal/podresize"
)

// Messages of the conditions, part of the observable API.
const (
	msgNotSuspended        = "Sandbox is not suspended"
	msgSuspendUnknown      = "Pod state is unknown. Sandbox suspension cannot be confirmed"
	msgPodTerminated       = "Pod has been terminated. Sandbox is suspended"
	msgIdle                = "Pod has been terminated. Sandbox was suspended for being idle"
	msgPodNotOwned         = "Refused to delete pod because it is not owned by this sandbox"
	msgPodTerminating      = "Pod is terminating. Sandbox is suspending"
	msgRootfsHold          = "Pod is kept until its root filesystem is captured (condition RootfsKept). Sandbox is suspending"
	msgMemoryHold          = "Pod is kept until its memory is checkpointed (condition MemoryKept). Sandbox is suspending"
	msgSuspending          = "Sandbox is suspending"
	msgPodDraining         = "Pod is terminating; a new Pod replaces it once it is gone"
	msgSuspended           = "Sandbox is suspended"
	msgPodSucceeded        = "Pod completed successfully"
	msgPodFailed           = "Pod failed"
	msgExpired             = "Sandbox has expired"
	msgSchedulingUnknown   = "Pod state is unknown. Pod scheduling cannot be determined"
	msgSchedulingNotReport = "Pod has not reported a PodScheduled condition yet"
)

// computeStatus sets every condition and field the Sandbox controller owns from one pass's
// observation. It is pure.
func computeStatus(sb *agentsv1beta1.Sandbox, obs *observation, clusterDomain string) {
	setSuspended(sb, obs)
	setReady(sb, obs)
	setPodScheduled(sb, obs)
	setFinished(sb, obs)
	setEgressPolicy(sb, obs)
	setResized(sb, obs)
	setRootfsKept(sb, obs)
	setMemoryKept(sb, obs)
	setChildFields(sb, obs, clusterDomain)
}

// setResized reports, on Sandboxes that resize in place, whether the Pod runs with the resources
// spec.podTemplate gives its containers (podresize.Observe). It is absent on other Sandboxes.
func setResized(sb *agentsv1beta1.Sandbox, obs *observation) {
	if !resizesInPlace(sb) {
		meta.RemoveStatusCondition(&sb.Status.Conditions, agentsv1beta1.SandboxConditionResized)
		return
	}
	pod := obs.ownedPod()
	switch {
	case obs.resizeRefused != "":
		setCondition(sb, agentsv1beta1.SandboxConditionResized, metav1.ConditionFalse, agentsv1beta1.SandboxReasonResizeFailed, obs.resizeRefused)
	case pod == nil || !pod.DeletionTimestamp.IsZero() || podFinished(pod):
		setCondition(sb, agentsv1beta1.SandboxConditionResized, metav1.ConditionUnknown, agentsv1beta1.SandboxReasonResizeUnknown, "there is no running Pod to resize")
	default:
		out := podresize.Observe(pod, sb.Spec.PodTemplate.Spec.Containers)
		status := metav1.ConditionFalse
		if out.Done() {
			status = metav1.ConditionTrue
		}
		setCondition(sb, agentsv1beta1.SandboxConditionResized, status, out.Reason, out.Message)
	}
}

func setCondition(sb *agentsv1beta1.Sandbox, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: sb.Generation,
	})
}

// setSuspended reports whether a Suspended Sandbox has shed its Pod. It is always present.
func setSuspended(sb *agentsv1beta1.Sandbox, obs *observation) {
	status, reason, msg := metav1.ConditionFalse, agentsv1beta1.SandboxReasonNotSuspended, msgNotSuspended
	if suspended(sb) {
		switch {
		case obs.podUnknown:
			status, reason, msg = metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodStateUnknown, msgSuspendUnknown
		case obs.pod == nil && agentsv1beta1.SuspendedForIdle(sb.Annotations[agentsv1beta1.SuspendReasonAnnotation]):
			status, reason, msg = metav1.ConditionTrue, agentsv1beta1.SandboxReasonIdle, msgIdle
		case obs.pod == nil:
			status, reason, msg = metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodTerminated, msgPodTerminated
		case !obs.podOwned:
			reason, msg = agentsv1beta1.SandboxReasonPodNotOwned, msgPodNotOwned
		case obs.rootfs.hold:
			reason, msg = agentsv1beta1.SandboxReasonPodTerminating, msgRootfsHold
		case obs.memory.hold:
			reason, msg = agentsv1beta1.SandboxReasonPodTerminating, msgMemoryHold
		default:
			reason, msg = agentsv1beta1.SandboxReasonPodTerminating, msgPodTerminating
		}
	}
	setCondition(sb, agentsv1beta1.SandboxConditionSuspended, status, reason, msg)
}

// setReady computes Ready in precedence order: errors, suspension, a Pod rejected at admission,
// terminal Pod, dependencies.
func setReady(sb *agentsv1beta1.Sandbox, obs *observation) {
	ownedPod := obs.ownedPod()
	status, reason, msg := metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady, ""
	switch {
	case obs.multiplePods != nil:
		reason, msg = agentsv1beta1.SandboxReasonMultiplePods, obs.multiplePods.Error()
	case injectionError(obs.errs) != nil:
		reason, msg = agentsv1beta1.SandboxReasonInjectionInvalid, injectionError(obs.errs).Error()
	case imageConfigError(obs.errs) != nil:
		reason, msg = agentsv1beta1.SandboxReasonImageConfigRetrying, imageConfigError(obs.errs).Error()
		if imageconfig.Lasting(imageConfigError(obs.errs)) {
			reason = agentsv1beta1.SandboxReasonImageConfigUnreadable
		}
	case len(obs.errs) > 0:
		reason, msg = agentsv1beta1.SandboxReasonReconcilerError, "Error seen: "+obs.message()
	case suspended(sb):
		reason, msg = agentsv1beta1.SandboxReasonSuspended, msgSuspended
		if obs.pod != nil {
			msg = msgSuspending
		}
	case obs.rejection != nil:
		reason, msg = agentsv1beta1.SandboxReasonPodRejected, obs.rejection.readyMessage()
	case ownedPod != nil && !podConditionTrue(ownedPod, corev1.PodReady) && imageIncompatibility(ownedPod) != "":
		reason, msg = agentsv1beta1.SandboxReasonImageIncompatible, imageIncompatibility(ownedPod)
	case ownedPod != nil && ownedPod.Status.Phase == corev1.PodSucceeded:
		reason, msg = agentsv1beta1.SandboxReasonPodSucceeded, msgPodSucceeded
	case ownedPod != nil && ownedPod.Status.Phase == corev1.PodFailed && !podadmission.Rejected(ownedPod):
		reason, msg = agentsv1beta1.SandboxReasonPodFailed, msgPodFailed
	default:
		podReady, podMsg := podReadiness(ownedPod)
		serviceReady, serviceMsg := serviceReadiness(sb, obs)
		msg = podMsg + serviceMsg
		if podReady && serviceReady {
			status, reason = metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady
		}
	}
	setCondition(sb, agentsv1beta1.SandboxConditionReady, status, reason, msg)
}

// injectionError is the pass's refused sandboxd injection, without its terminal wrapper.
func injectionError(errs []error) error {
	for _, err := range errs {
		if errors.Is(err, blueprint.ErrSandboxdInjection) {
			if errors.Is(err, reconcile.TerminalError(nil)) {
				err = errors.Unwrap(err)
			}
			return err
		}
	}
	return nil
}

// imageConfigError is the pass's failure to read what the image runs from its registry.
func imageConfigError(errs []error) error {
	for _, err := range errs {
		if errors.Is(err, imageconfig.ErrUnreadable) {
			return err
		}
	}
	return nil
}

// imageIncompatibility says why the Pod's image cannot run as its template asks, or "": an
// injected sandboxd's failed preflight (its termination message, the last or the current one),
// or the kubelet refusing to start a root image under runAsNonRoot.
func imageIncompatibility(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.ExitCode == sandboxd.PreflightExitCode && strings.HasPrefix(t.Message, sandboxd.PreflightMessagePrefix) {
				return fmt.Sprintf("container %q cannot host sandboxd: %s", cs.Name, strings.TrimPrefix(t.Message, sandboxd.PreflightMessagePrefix))
			}
		}
		if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "runAsNonRoot") {
			return fmt.Sprintf("container %q: %s (fix: set securityContext.runAsUser to a non-root uid such as 1000 in the template's pod spec, or use an image whose USER is a non-root uid)",
				cs.Name, w.Message)
		}
	}
	return ""
}

// podReadiness says whether the Pod serves: Running, Ready, addressable and not terminating. A
// terminating Pod still reports Ready until its containers stop, but it is going: a Sandbox
// resumed while the Pod of its suspension drains must not send traffic to it (its processes get
// SIGTERM), so it waits for the replacement Pod.
func podReadiness(pod *corev1.Pod) (bool, string) {
	switch {
	case pod == nil:
		return false, "Pod does not exist"
	case !pod.DeletionTimestamp.IsZero():
		return false, msgPodDraining
	case pod.Status.Phase != corev1.PodRunning:
		return false, fmt.Sprintf("Pod exists with phase: %s", pod.Status.Phase)
	case !podConditionTrue(pod, corev1.PodReady):
		return false, "Pod is Running but not Ready"
	case len(pod.Status.PodIPs) == 0:
		return false, "Pod is Ready but has no podIPs yet"
	}
	return true, "Pod is Ready"
}

// serviceReadiness says whether the Service, when one is required, exists. A Service is required
// when spec.service is true, or unset while an owned Service is kept.
func serviceReadiness(sb *agentsv1beta1.Sandbox, obs *observation) (bool, string) {
	required := (sb.Spec.Service != nil && *sb.Spec.Service) || (sb.Spec.Service == nil && obs.service != nil)
	switch {
	case !required:
		return true, ""
	case obs.service == nil:
		return false, "; Service does not exist"
	}
	return true, "; Service Exists"
}

// setPodScheduled mirrors the owned Pod's PodScheduled condition; it is absent without one.
func setPodScheduled(sb *agentsv1beta1.Sandbox, obs *observation) {
	pod := obs.ownedPod()
	switch {
	case obs.podUnknown:
		setCondition(sb, agentsv1beta1.SandboxConditionPodScheduled, metav1.ConditionUnknown,
			agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingUnknown)
	case pod == nil:
		meta.RemoveStatusCondition(&sb.Status.Conditions, agentsv1beta1.SandboxConditionPodScheduled)
	default:
		i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
		if i < 0 {
			setCondition(sb, agentsv1beta1.SandboxConditionPodScheduled, metav1.ConditionUnknown,
				agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport)
			return
		}
		c := pod.Status.Conditions[i]
		reason := c.Reason
		if reason == "" {
			reason = agentsv1beta1.SandboxReasonPodSchedulingUnknown
			if c.Status == corev1.ConditionTrue {
				reason = agentsv1beta1.SandboxReasonPodScheduled
			}
		}
		setCondition(sb, agentsv1beta1.SandboxConditionPodScheduled, metav1.ConditionStatus(c.Status), reason, c.Message)
	}
}

// setFinished is True while the owned Pod is in a terminal phase, and absent otherwise. A Pod the
// kubelet rejected at admission before any container started is not the Sandbox's end: it is
// replaced (reject.go).
func setFinished(sb *agentsv1beta1.Sandbox, obs *observation) {
	pod := obs.ownedPod()
	switch {
	case pod != nil && pod.Status.Phase == corev1.PodSucceeded:
		setCondition(sb, agentsv1beta1.SandboxConditionFinished, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodSucceeded, msgPodSucceeded)
	case pod != nil && pod.Status.Phase == corev1.PodFailed && !podadmission.Rejected(pod):
		setCondition(sb, agentsv1beta1.SandboxConditionFinished, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodFailed, msgPodFailed)
	default:
		meta.RemoveStatusCondition(&sb.Status.Conditions, agentsv1beta1.SandboxConditionFinished)
	}
}

// setChildFields reports the Pod's addresses and node, the selector and the Service.
func setChildFields(sb *agentsv1beta1.Sandbox, obs *observation, clusterDomain string) {
	sb.Status.PodIPs, sb.Status.NodeName = nil, ""
	if pod := obs.ownedPod(); pod != nil {
		for _, ip := range pod.Status.PodIPs {
			sb.Status.PodIPs = append(sb.Status.PodIPs, ip.IP)
		}
		sb.Status.NodeName = pod.Spec.NodeName
	}
	// The selector stays once a Pod was seen, so scale-style consumers keep a stable value.
	if obs.pod != nil || obs.multiplePods != nil {
		sb.Status.LabelSelector = selector(sb)
	}
	if obs.serviceSkipped {
		return
	}
	sb.Status.Service, sb.Status.ServiceFQDN = "", ""
	if obs.service != nil {
		sb.Status.Service = obs.service.Name
		sb.Status.ServiceFQDN = fmt.Sprintf("%s.%s.svc.%s", obs.service.Name, obs.service.Namespace, clusterDomain)
	}
}

func (o *observation) ownedPod() *corev1.Pod {
	if o.podOwned {
		return o.pod
	}
	return nil
}

func suspended(sb *agentsv1beta1.Sandbox) bool {
	return sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended
}

func podConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
