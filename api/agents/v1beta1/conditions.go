package v1beta1

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
