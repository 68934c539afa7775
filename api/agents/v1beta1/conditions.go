package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a Sandbox.
const (
	// SandboxConditionReady is True when the Pod runs, is Ready, has an IP, and the Service
	// exists when one is required.
	SandboxConditionReady = "Ready"
	// SandboxConditionSuspended reports whether a Suspended sandbox has shed its Pod.
	SandboxConditionSuspended = "Suspended"
	// SandboxConditionPodScheduled mirrors the Pod's PodScheduled condition while a Pod exists.
	SandboxConditionPodScheduled = "PodScheduled"
	// SandboxConditionFinished is True while the Pod is in a terminal phase.
	SandboxConditionFinished = "Finished"
)

// Reasons of the Ready condition.
const (
	SandboxReasonDependenciesReady    = "DependenciesReady"
	SandboxReasonDependenciesNotReady = "DependenciesNotReady"
	SandboxReasonSuspended            = "SandboxSuspended"
	SandboxReasonExpired              = "SandboxExpired"
	SandboxReasonReconcilerError      = "ReconcilerError"
	SandboxReasonMultiplePods         = "MultiplePods"
	// SandboxReasonImageIncompatible: the image cannot host the sandboxd injected into it (no
	// shell, runs as root, a command it does not have), as the injected sandboxd's preflight
	// reported in its termination message, or the kubelet refuses the image's user under the
	// template's runAsNonRoot. The message names the container, the cause and the fix.
	SandboxReasonImageIncompatible = "ImageIncompatible"
	// SandboxReasonInjectionInvalid: the pod template asks for sandboxd injection
	// (InjectSandboxdAnnotation) in a way the controller cannot honour (args without a command,
	// a name sandboxd's volume needs, no --sandboxd-image); no Pod is created until it is fixed.
	SandboxReasonInjectionInvalid = "InjectionInvalid"
	// SandboxReasonImageConfigUnreadable: the pod template asks for sandboxd injection and names
	// no command, so the controller reads what the image runs from its registry, and cannot: the
	// registry refuses its credentials or lacks the image, or has not answered for a while
	// (ImageConfigRetrying before). No Pod is created; the controller retries with back-off, but
	// waiting alone will not help, so a pool counts the member as incompatible and a client
	// waiting for the Sandbox stops. The message names the image, the registry's answer and the
	// fixes.
	SandboxReasonImageConfigUnreadable = "ImageConfigUnreadable"
	// SandboxReasonImageConfigRetrying: as ImageConfigUnreadable, but the registry did not answer
	// (a network error, a server error, 429) for a short while only: a blip, retried. It becomes
	// ImageConfigUnreadable when it lasts (30 s by default).
	SandboxReasonImageConfigRetrying = "ImageConfigRetrying"
	// SandboxReasonPodRejected (Paddock addition): the kubelet refused the Pod at admission
	// (OutOfmemory, OutOfcpu, NodeAffinity, ...) before any of its containers started, so the
	// controller deleted it and creates a new Pod after a back-off. The message names the node,
	// the kubelet's reason and message, and when the new Pod follows. It is also the reason of the
	// Warning event that reports each such replacement.
	SandboxReasonPodRejected = "PodRejected"
)

// Reasons of the Ready and Finished conditions for a Pod in a terminal phase.
const (
	SandboxReasonPodSucceeded = "PodSucceeded"
	SandboxReasonPodFailed    = "PodFailed"
)

// Reasons of the Suspended condition.
const (
	SandboxReasonNotSuspended    = "NotSuspended"
	SandboxReasonPodTerminated   = "PodTerminated"
	SandboxReasonPodTerminating  = "PodTerminating"
	SandboxReasonPodNotOwned     = "PodNotOwned"
	SandboxReasonPodStateUnknown = "PodStateUnknown"
	// SandboxReasonIdle is the reason of Suspended=True when the idle controller suspended the
	// Sandbox (annotation paddock.dev/suspend-reason: Idle) rather than a user.
	SandboxReasonIdle = "Idle"
	// SandboxReasonPodNotTerminated is kept for wire compatibility; no controller sets it.
	//
	// Deprecated: use SandboxReasonPodTerminating.
	SandboxReasonPodNotTerminated = "PodNotTerminated"
)

// Reasons of the PodScheduled condition that the controller sets itself; any other reason is
// copied from the Pod.
const (
	SandboxReasonPodScheduled         = "PodScheduled"
	SandboxReasonPodSchedulingUnknown = "PodSchedulingUnknown"
)

// Paddock's egress policy (api/egress, docs/design/egress.md): a condition upstream does not
// have, present only while the Sandbox's pod template carries a policy and a Pod exists.
const (
	// SandboxConditionEgressPolicy is True when the node enforces the Sandbox's egress policy,
	// False when it could not (the message says why and what is in force instead), Unknown until
	// the node's egress component reports.
	SandboxConditionEgressPolicy = "EgressPolicy"
	SandboxReasonEgressApplied   = "Applied"
	SandboxReasonEgressRejected  = "Rejected"
	SandboxReasonEgressPending   = "Pending"
)

// CannotHostSandboxd returns the Ready condition of a Sandbox whose image or pod template cannot
// host sandboxd (Ready False, reason ImageIncompatible, InjectionInvalid or
// ImageConfigUnreadable), nil otherwise: waiting will not make such a Sandbox Ready, the
// template, its image or the registry has to change.
func (s *Sandbox) CannotHostSandboxd() *metav1.Condition {
	ready := meta.FindStatusCondition(s.Status.Conditions, SandboxConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse {
		return nil
	}
	switch ready.Reason {
	case SandboxReasonImageIncompatible, SandboxReasonInjectionInvalid, SandboxReasonImageConfigUnreadable:
		return ready
	}
	return nil
}

// SandboxConditionResized exists on Sandboxes with InPlaceResizeAnnotation: True when the Pod
// runs with the CPU and memory spec.podTemplate gives its containers, False while a resize is
// being applied or when the node refused it.
const SandboxConditionResized = "Resized"

// Reasons of the Resized condition. Deferred and Infeasible are the kubelet's reasons of the
// Pod's PodResizePending condition; the message carries the kubelet's.
const (
	SandboxReasonResized          = "Resized"
	SandboxReasonResizeInProgress = "ResizeInProgress"
	SandboxReasonResizeDeferred   = "ResizeDeferred"
	SandboxReasonResizeInfeasible = "ResizeInfeasible"
	// SandboxReasonResizeFailed: the API server refused the resize, or the kubelet reported an
	// error applying it.
	SandboxReasonResizeFailed = "ResizeFailed"
	// SandboxReasonResizeUnknown: there is no running Pod to resize.
	SandboxReasonResizeUnknown = "ResizeUnknown"
)

// SandboxConditionRootfsKept exists on Sandboxes that keep their root filesystem across
// suspensions (annotation snapshots.paddock.dev/suspend: rootfs): True when the last suspension
// was captured and the next Pod starts from that image (the message names it), False while a
// capture runs before the Pod goes or when it failed (the Pod then keeps running: nothing is
// lost), and when the image to resume from is gone.
const SandboxConditionRootfsKept = "RootfsKept"

// Reasons of the RootfsKept condition.
const (
	// SandboxReasonRootfsRunning: the Sandbox runs its Pod; nothing to keep yet, or the
	// Pod started from the image the message names.
	SandboxReasonRootfsRunning = "Running"
	// SandboxReasonRootfsCapturing: a SandboxSnapshot captures the Pod before it is deleted.
	SandboxReasonRootfsCapturing = "Capturing"
	// SandboxReasonRootfsCaptured: the Pod is gone and the next one starts from the captured image.
	SandboxReasonRootfsCaptured = "Captured"
	// SandboxReasonRootfsCaptureFailed: the capture failed; the suspension is refused and the
	// Pod keeps running. Set operatingMode Running and Suspended again to retry.
	SandboxReasonRootfsCaptureFailed = "CaptureFailed"
	// SandboxReasonRootfsNotCaptured: the Pod had no running container to capture; the next
	// Pod starts from the last captured image, if any.
	SandboxReasonRootfsNotCaptured = "NotCaptured"
	// SandboxReasonRootfsNotConfigured: the cluster has no snapshot repository or capture image;
	// the Sandbox suspends as upstream, keeping its volumes only.
	SandboxReasonRootfsNotConfigured = "NotConfigured"
	// SandboxReasonRootfsInvalidAnnotation: the suspend annotation has a value the controller does
	// not know; the Sandbox suspends as without it, and the message names the value to set.
	SandboxReasonRootfsInvalidAnnotation = "InvalidAnnotation"
	// SandboxReasonRootfsSnapshotMissing: the SandboxSnapshot to resume from is gone or not
	// Ready; the Pod started from the pod template's image.
	SandboxReasonRootfsSnapshotMissing = "SnapshotMissing"
)

// SandboxConditionMemoryKept exists on Sandboxes that keep their memory across suspensions
// (annotation snapshots.paddock.dev/suspend: memory, gVisor only): True when the last suspension
// was checkpointed and the next Pod restores it, or the running Pod was restored; False while a
// checkpoint runs before the Pod goes or a restore is under way, and when memory was not kept
// (the reason says why; the Sandbox then comes back cold, with its volumes).
const SandboxConditionMemoryKept = "MemoryKept"

// Reasons of the MemoryKept condition.
const (
	// SandboxReasonMemoryRunning: the Sandbox runs a Pod that booted cold; its memory is
	// checkpointed when it is suspended.
	SandboxReasonMemoryRunning = "Running"
	// SandboxReasonMemoryCheckpointing: a node Pod checkpoints the sandbox before its Pod goes.
	SandboxReasonMemoryCheckpointing = "Checkpointing"
	// SandboxReasonMemoryCheckpointed: the Pod is gone and the next one restores its memory.
	SandboxReasonMemoryCheckpointed = "Checkpointed"
	// SandboxReasonMemoryCheckpointFailed: the checkpoint failed; the Sandbox suspended with its
	// volumes only, and the message says why.
	SandboxReasonMemoryCheckpointFailed = "CheckpointFailed"
	// SandboxReasonMemoryNotCheckpointed: the Pod had no running container to checkpoint.
	SandboxReasonMemoryNotCheckpointed = "NotCheckpointed"
	// SandboxReasonMemoryNotGvisor: the Pod does not run under gVisor (runsc), which alone can
	// checkpoint memory; the Sandbox suspends with its volumes only.
	SandboxReasonMemoryNotGvisor = "NotGvisor"
	// SandboxReasonMemoryNotConfigured: the controller has no capture image or runsc path; the
	// Sandbox suspends with its volumes only.
	SandboxReasonMemoryNotConfigured = "NotConfigured"
	// SandboxReasonMemoryRestoring: the Pod, pinned to the checkpoint's node, is restoring.
	SandboxReasonMemoryRestoring = "Restoring"
	// SandboxReasonMemoryRestored: the Pod continues the memory of the suspended one.
	SandboxReasonMemoryRestored = "Restored"
	// SandboxReasonMemoryRestoreFailed: the restore failed (or the restored container stopped);
	// the Pod was replaced by one that boots cold.
	SandboxReasonMemoryRestoreFailed = "RestoreFailed"
	// SandboxReasonMemoryNodeGone: the node holding the checkpoint is gone; the Pod boots cold.
	SandboxReasonMemoryNodeGone = "NodeGone"
)
