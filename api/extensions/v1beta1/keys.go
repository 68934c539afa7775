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

// Annotations on a SandboxTemplate that let warm Sandboxes serve claims with spec.env, through
// sandboxd's PUT /v1/claim-settings (docs/design/sandboxd-claim-settings.md).
const (
	// ClaimSettingsAnnotation says the template's runtime accepts claim settings. The only value
	// is ClaimSettingsSandboxd: the template's first container runs sandboxd with
	// --claim-token-file, listening for REST on ClaimSettingsPort.
	ClaimSettingsAnnotation = "extensions.agents.x-k8s.io/claim-settings"
	// ClaimSettingsSecretAnnotation names the Secret, in the template's namespace, whose
	// ClaimTokenSecretKey holds the claim token; DefaultClaimTokenSecret when absent.
	ClaimSettingsSecretAnnotation = "extensions.agents.x-k8s.io/claim-settings-secret"
)

// Values of the claim-settings annotations.
const (
	// ClaimSettingsSandboxd is the value of ClaimSettingsAnnotation for sandboxd.
	ClaimSettingsSandboxd = "sandboxd"
	// DefaultClaimTokenSecret is the Secret read when the template does not name one.
	DefaultClaimTokenSecret = "sandboxd-claim-token"
	// ClaimTokenSecretKey is the key of the claim token in that Secret.
	ClaimTokenSecretKey = "token"
	// ClaimSettingsPort is sandboxd's REST port, where the controller sends claim settings.
	ClaimSettingsPort = 8080
)
