package v1beta1

// Annotations on a SandboxClaim.
const (
	// AssignedSandboxNameAnnotation names the warm Sandbox a claim adopted. The same key was once
	// a label; readers should accept either.
	AssignedSandboxNameAnnotation = "agents.x-k8s.io/sandbox-name"
	// ControllerFirstObservedAtAnnotation records, RFC 3339 with nanoseconds, when the controller
	// first saw the claim.
	ControllerFirstObservedAtAnnotation = "agents.x-k8s.io/controller-first-observed-at"
	// ClaimFirstReadyAtAnnotation records when the claim first became Ready, or "unknown".
	ClaimFirstReadyAtAnnotation = "agents.x-k8s.io/claim-first-ready-at"
	// ClientFirstRequestedAtAnnotation is set by SDK clients to when they asked for the claim.
	ClientFirstRequestedAtAnnotation = "agents.x-k8s.io/client-first-requested-at"
	// WebhookFirstObservedAtAnnotation is read, never written, for compatibility.
	WebhookFirstObservedAtAnnotation = "agents.x-k8s.io/webhook-first-observed-at"
)

// Labels on a SandboxClaim.
const (
	// MCPSessionLabel carries the id of the `paddock mcp` session that claimed the sandbox; the
	// server deletes the session's claims by it when the session ends.
	MCPSessionLabel = "paddock.dev/mcp-session"
)

// FirstReadyAtUnknown is the value of ClaimFirstReadyAtAnnotation when the time is not known.
const FirstReadyAtUnknown = "unknown"

// Cache index names.
const (
	// WarmPoolRefField indexes SandboxClaims by spec.warmPoolRef.name.
	WarmPoolRefField = ".spec.warmPoolRef.name"
	// TemplateRefField indexes SandboxWarmPools by spec.sandboxTemplateRef.name.
	TemplateRefField = ".spec.sandboxTemplateRef.name"
)

// Annotations on a SandboxTemplate.
const (
	// RuntimeAnnotation names the runtime a template's first container runs. RuntimeSandboxd
	// (docs/design/credentials.md) locks pool members until the controller binds them to a claim
	// with the control token (SANDBOXD_REQUIRE_CLAIM), makes every warm claim send claim
	// settings before it turns Ready, and lets claims with spec.env be served warm
	// (docs/design/sandboxd-claim-settings.md). It needs per-Sandbox credentials (manager
	// --sandbox-credentials, the default).
	RuntimeAnnotation = "paddock.dev/runtime"
)

// Values of RuntimeAnnotation.
const (
	// RuntimeSandboxd says the template's first container runs sandboxd, serving REST on
	// api/sandboxd.RESTPort.
	RuntimeSandboxd = "sandboxd"
)

// Autosize (docs/design/autosize.md): annotations on a SandboxWarmPool that let the pool
// controller size spec.replicas from the demand it sees, writing it through the scale
// subresource. Paddock's own keys, so upstream's spec.replicas keeps its meaning when they are
// absent. config/admission/autosize-policy.yaml checks them at admission.
const (
	// AutosizeAnnotation "true" turns autosize on; "false" or absent leaves spec.replicas to
	// the user.
	AutosizeAnnotation = "paddock.dev/autosize"
	// AutosizeMinAnnotation is the fewest members autosize keeps: an integer from 0 to
	// AutosizeLimit, AutosizeDefaultMin when absent.
	AutosizeMinAnnotation = "paddock.dev/autosize-min"
	// AutosizeMaxAnnotation is the most members autosize keeps: an integer from 1 to
	// AutosizeLimit and at least the minimum, AutosizeDefaultMax when absent.
	AutosizeMaxAnnotation = "paddock.dev/autosize-max"
	// AutosizeHeadroomAnnotation is how many members autosize keeps above the demand it
	// measured: an integer from 0 to AutosizeLimit, AutosizeDefaultHeadroom when absent.
	AutosizeHeadroomAnnotation = "paddock.dev/autosize-headroom"
)

// Defaults and bounds of the autosize annotations; the admission policy spells the same numbers.
const (
	AutosizeDefaultMin      = 1
	AutosizeDefaultMax      = 10
	AutosizeDefaultHeadroom = 1
	AutosizeLimit           = 10000
)

// Warm resources (docs/design/warm-resources.md): annotations on a SandboxWarmPool that let its
// unclaimed members wait small and be resized in place when claimed, and let claims choose CPU
// and memory within the pool's bounds. Values are Kubernetes quantities above zero. They size
// the first container of the template (the one running the sandbox's workload); the limits the
// template sets follow so that the Pod's QoS class never changes, which in-place resize forbids.
// config/admission/warm-resources-policy.yaml checks them at admission.
const (
	// IdleCPUAnnotation is the CPU request an unclaimed member waits with; when claimed it is
	// resized in place to the template's, or its claim's, CPU.
	IdleCPUAnnotation = "paddock.dev/idle-cpu"
	// IdleMemoryAnnotation is the memory request an unclaimed member waits with.
	IdleMemoryAnnotation = "paddock.dev/idle-memory"
	// ClaimCPUMaxAnnotation is the most CPU a claim of the pool may ask for (CPUAnnotation);
	// without it claims of the pool may not choose their CPU.
	ClaimCPUMaxAnnotation = "paddock.dev/claim-cpu-max"
	// ClaimMemoryMaxAnnotation is the most memory a claim of the pool may ask for.
	ClaimMemoryMaxAnnotation = "paddock.dev/claim-memory-max"
)

// Annotations on a SandboxClaim (and keys of an E2B create's metadata) choosing the Sandbox's
// resources within its pool's bounds: the first container's request, and its limit where the
// template sets one.
const (
	CPUAnnotation    = "paddock.dev/cpu"
	MemoryAnnotation = "paddock.dev/memory"
)
