package v1beta1

// Prefixes of the keys reserved for the controllers. Keys with these prefixes in a pod template
// are dropped rather than copied to the Pod.
const (
	ReservedKeyPrefix           = "agents.x-k8s.io/"
	ReservedExtensionsKeyPrefix = "extensions.agents.x-k8s.io/"
)

// Labels.
const (
	// SandboxNameHashLabel carries NameHash(sandbox name) on the Pod, Service and volume claims
	// of a Sandbox. It is the Service selector and the tracking label for adoption.
	SandboxNameHashLabel = "agents.x-k8s.io/sandbox-name-hash"
	// AdoptableLabel set to "true" on an unowned Pod, Service or volume claim lets a Sandbox adopt it.
	AdoptableLabel = "agents.x-k8s.io/adoptable"
	// LaunchTypeLabel is "cold" or "warm" on Sandboxes made by the extensions.
	LaunchTypeLabel = "agents.x-k8s.io/launch-type"
	// CreatedByLabel names the kind of client that created an object; normalised on the Pod.
	CreatedByLabel = "agents.x-k8s.io/created-by"
	// WarmPoolSandboxLabel carries NameHash(pool name) on pool members, their pod templates and Pods.
	WarmPoolSandboxLabel = "agents.x-k8s.io/warm-pool-sandbox"
	// SandboxTemplateRefHashLabel carries NameHash(template name) on a template, the Sandboxes made
	// from it and their Pods; the template's NetworkPolicy selects Pods by it.
	SandboxTemplateRefHashLabel = "agents.x-k8s.io/sandbox-template-ref-hash"
	// SandboxTemplateHashLabel carries NameHash(JSON of the template's blueprint) on pool members;
	// a differing value marks a member stale.
	SandboxTemplateHashLabel = "agents.x-k8s.io/sandbox-template-hash"
	// SandboxPodTemplateHashLabel carries NameHash(JSON of the template's podTemplate).
	//
	// Deprecated: staleness uses SandboxTemplateHashLabel; kept for wire compatibility.
	SandboxPodTemplateHashLabel = "agents.x-k8s.io/sandbox-pod-template-hash"
	// ClaimUIDLabel carries the UID of the SandboxClaim bound to a Sandbox, on the Sandbox, its
	// pod template and (unlike upstream) its Pod.
	ClaimUIDLabel = "agents.x-k8s.io/claim-uid"
)

// Values of LaunchTypeLabel.
const (
	LaunchTypeCold = "cold"
	LaunchTypeWarm = "warm"
)

// Annotations.
const (
	// PodNameAnnotation on a Sandbox names its backing Pod when that differs from the Sandbox name.
	PodNameAnnotation = "agents.x-k8s.io/pod-name"
	// SandboxTemplateRefAnnotation on a Sandbox names the SandboxTemplate it was made from.
	SandboxTemplateRefAnnotation = "agents.x-k8s.io/sandbox-template-ref"
	// PropagatedLabelsAnnotation on a Pod lists, sorted and comma-joined, the label keys copied from
	// the pod template, so keys removed from the template can be removed from the Pod.
	PropagatedLabelsAnnotation = "agents.x-k8s.io/propagated-labels"
	// PropagatedAnnotationsAnnotation is PropagatedLabelsAnnotation for annotations.
	PropagatedAnnotationsAnnotation = "agents.x-k8s.io/propagated-annotations"
	// ClaimNameAnnotation on a Pod names the SandboxClaim bound to its Sandbox.
	ClaimNameAnnotation = "agents.x-k8s.io/claim-name"
	// TraceContextAnnotation carries W3C trace headers as a JSON map.
	TraceContextAnnotation = "opentelemetry.io/trace-context"
	// SafeToEvictAnnotation tells the cluster autoscaler whether it may evict a Pod.
	SafeToEvictAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict"
)

// Cache index names.
const (
	// PodNameHashIndex indexes Pods by the value of SandboxNameHashLabel.
	PodNameHashIndex = ".metadata.labels[agents.x-k8s.io/sandbox-name-hash]"
	// SandboxWarmPoolIndex indexes Sandboxes by the value of WarmPoolSandboxLabel.
	SandboxWarmPoolIndex = ".metadata.labels[agents.x-k8s.io/warm-pool-sandbox]"
	// SandboxClaimUIDIndex indexes Sandboxes by the value of ClaimUIDLabel, so a claim finds the
	// Sandbox bound to it without a status.
	SandboxClaimUIDIndex = ".metadata.labels[agents.x-k8s.io/claim-uid]"
)

// Scale to zero (docs/compatibility.md, "Idle policy"). The policy annotations go on a
// SandboxTemplate (the default for its sandboxes), a SandboxClaim or a Sandbox; the most specific
// one wins (Sandbox, then claim, then template). They are Paddock's own keys, so upstream
// manifests and SDKs never see them.
const (
	// IdleTimeoutAnnotation is a Go duration (for example "15m"): a Ready Sandbox with no activity
	// for that long is suspended with reason Idle. "0" or absent turns idling off.
	IdleTimeoutAnnotation = "paddock.dev/idle-timeout"
	// WakeOnRequestAnnotation ("true" by default, or "false") says whether a request through the
	// router wakes a Sandbox that was suspended for being idle.
	WakeOnRequestAnnotation = "paddock.dev/wake-on-request"
	// LastActivityAnnotation on a Sandbox records, RFC 3339, the last activity the control plane
	// saw. It is written at most about once a minute, never per request.
	LastActivityAnnotation = "paddock.dev/last-activity"
	// SuspendReasonAnnotation on a Sandbox says why the control plane suspended it; only
	// SuspendReasonIdle may be woken by traffic through the router. A manual suspension carries
	// none, and the annotation is removed whenever the Sandbox runs again.
	SuspendReasonAnnotation = "paddock.dev/suspend-reason"
	// WokenAtAnnotation is when a router resumed the Sandbox for a request (RFC 3339), written in
	// the resume patch itself. Until the Sandbox is Ready again, every router replica holds its
	// requests for the rest of its wake timeout instead of answering "not ready".
	WokenAtAnnotation = "paddock.dev/woken-at"
)

// SandboxClientLabel ("true") on a Pod makes it a client of its namespace's sandboxes in the
// upstream-unauthenticated-migration profile: the managed NetworkPolicy admits it, and the
// router serves its requests without a token (docs/compatibility.md, "Install profiles"). The
// default install reads it nowhere.
const SandboxClientLabel = "paddock.dev/sandbox-client"

// Bring your own image (docs/byo-image.md).
const (
	// InjectSandboxdAnnotation ("true") on a pod template (a Sandbox's spec.podTemplate.metadata,
	// so also a SandboxTemplate's) has the Sandbox controller deliver sandboxd into the Pod and
	// start the first container through it: an image without sandboxd gets the sandbox APIs,
	// and the container's command keeps running as a service sandboxd supervises. A template
	// carrying it counts as a sandboxd runtime (its pool members start locked).
	InjectSandboxdAnnotation = "paddock.dev/inject-sandboxd"
)

// Values of SuspendReasonAnnotation.
const (
	// SuspendReasonIdle marks a Sandbox the idle controller suspended and traffic may wake.
	SuspendReasonIdle = "Idle"
	// SuspendReasonIdleNoWake marks a Sandbox the idle controller suspended whose policy says
	// paddock.dev/wake-on-request: "false"; only a user resumes it.
	SuspendReasonIdleNoWake = "IdleNoWake"
)

// SuspendedForIdle reports whether a suspend-reason value is one the idle controller writes.
func SuspendedForIdle(reason string) bool {
	return reason == SuspendReasonIdle || reason == SuspendReasonIdleNoWake
}

// In-place resize (docs/design/warm-resources.md).
const (
	// InPlaceResizeAnnotation ("true") on a Sandbox has the Sandbox controller carry changes of
	// its spec.podTemplate containers' CPU and memory to the running Pod through the Pod's resize
	// subresource, without a restart, and report the outcome as the Resized condition. Without
	// it, as upstream, a template edit reaches only the next Pod. Pools with
	// paddock.dev/idle-cpu or paddock.dev/idle-memory stamp it on their members; a claim that
	// adopts a member and changes its resources stamps it too.
	InPlaceResizeAnnotation = "paddock.dev/in-place-resize"
)
