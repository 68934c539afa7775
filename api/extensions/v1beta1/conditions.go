package v1beta1

// Condition types of a SandboxClaim. Ready mirrors the bound Sandbox's Ready condition unless
// the claim itself has a problem; Finished mirrors the Sandbox's Finished condition.
const (
	ClaimConditionReady    = "Ready"
	ClaimConditionFinished = "Finished"
)

// Reasons of a claim's Ready condition that the claim controller sets itself. Other reasons are
// copied from the bound Sandbox.
const (
	ClaimReasonTemplateNotFound          = "TemplateNotFound"
	ClaimReasonWarmPoolNotFound          = "WarmPoolNotFound"
	ClaimReasonAdoptionConflict          = "AdoptionConflict"
	ClaimReasonSandboxCreatePending      = "SandboxCreatePending"
	ClaimReasonInvalidMetadata           = "InvalidMetadata"
	ClaimReasonEnvVarsInjectionRejected  = "EnvVarsInjectionRejected"
	ClaimReasonVolumeClaimTemplatesError = "VolumeClaimTemplatesError"
	ClaimReasonReconcilerError           = "ReconcilerError"
	ClaimReasonExpired                   = "ClaimExpired"
	ClaimReasonSandboxMissing            = "SandboxMissing"
	ClaimReasonSandboxExpired            = "SandboxExpired"
	ClaimReasonSandboxNotReady           = "SandboxNotReady"
)
