package v1beta1

// Condition types of a SandboxClaim. Ready mirrors the bound Sandbox's Ready condition unless
// the claim itself has a problem; Finished mirrors the Sandbox's Finished condition.
const (
	ClaimConditionReady    = "Ready"
	ClaimConditionFinished = "Finished"
	// ClaimConditionSettingsDelivered exists on claims that a warm Sandbox of a sandboxd template
	// (RuntimeAnnotation) served, and on claims with spec.env that tried to: True once sandboxd
	// is bound to the claim (and has its env), False while that is pending or after it failed
	// and the claim fell back to a cold Sandbox.
	ClaimConditionSettingsDelivered = "SettingsDelivered"
)

// Reasons of the SettingsDelivered condition; SettingsPending and SettingsFailed are also the
// Ready reason while the claim waits for delivery or discards the warm Sandbox.
const (
	ClaimReasonSettingsDelivered = "ClaimSettingsDelivered"
	ClaimReasonSettingsPending   = "ClaimSettingsPending"
	ClaimReasonSettingsFailed    = "ClaimSettingsFailed"
	// ClaimReasonWarmMemberTampered: sandboxd in the adopted member was already bound to another
	// claim (409), so someone reached it before the controller; the member is deleted and the
	// claim served cold. Also the reason of the Warning event.
	ClaimReasonWarmMemberTampered = "WarmMemberTampered"
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

// Condition types of a SandboxWarmPool. Each names the cause when the pool is short of members.
const (
	// PoolConditionTemplateReady is True when the pool's SandboxTemplate exists.
	PoolConditionTemplateReady = "TemplateReady"
	// PoolConditionMembersCreated is True when the pool's last member creates succeeded (or it
	// needed none); False with the cause when they failed or could not be sent.
	PoolConditionMembersCreated = "MembersCreated"
	// PoolConditionProgressing is False when members never become Ready: replaced after the
	// readiness grace period (MembersNotReady), held because no node fits them
	// (MembersUnschedulable) or because their image cannot host sandboxd (MembersIncompatible).
	PoolConditionProgressing = "Progressing"
	// PoolConditionAutosizing exists on pools with paddock.dev/autosize "true": True while the
	// controller sizes spec.replicas from demand, False naming the annotation or the write that
	// stops it (spec.replicas then stays as it is).
	PoolConditionAutosizing = "Autosizing"
)

// Reasons of the pool conditions. TemplateNotFound is shared with the claim's Ready condition.
const (
	PoolReasonTemplateFound        = "TemplateFound"
	PoolReasonTemplateNotFound     = ClaimReasonTemplateNotFound
	PoolReasonMembersCreated       = "MembersCreated"
	PoolReasonQuotaExceeded        = "QuotaExceeded"
	PoolReasonNameTooLong          = "NameTooLong"
	PoolReasonRuntimeClassNotFound = "RuntimeClassNotFound"
	PoolReasonCreateFailed         = "CreateFailed"
	// PoolReasonNamespaceTerminating: the pool's namespace is being deleted, so the API server
	// refuses new members; the pool sends none until the namespace is gone.
	PoolReasonNamespaceTerminating = "NamespaceTerminating"
	PoolReasonMembersProgressing   = "MembersProgressing"
	PoolReasonMembersNotReady      = "MembersNotReady"
	PoolReasonMembersUnschedulable = "MembersUnschedulable"
	PoolReasonAutosizeActive       = "AutosizeActive"
	// PoolReasonAutosizeInvalid: an autosize annotation has a value the controller cannot use;
	// the message names it and the fix.
	PoolReasonAutosizeInvalid = "InvalidAutosizeAnnotation"
	// PoolReasonInvalidWarmResources: paddock.dev/idle-cpu or paddock.dev/idle-memory is not a
	// quantity above zero; the message names it. No member is created until it is fixed.
	PoolReasonInvalidWarmResources = "InvalidWarmResources"
	// PoolReasonScaleWriteFailed: writing spec.replicas through the scale subresource failed.
	PoolReasonScaleWriteFailed = "ScaleWriteFailed"
	// PoolReasonMembersIncompatible: members' Sandboxes report ImageIncompatible or
	// InjectionInvalid; they are held rather than replaced (a replacement would fail the same
	// way) until the template changes.
	PoolReasonMembersIncompatible = "MembersIncompatible"
)

// ClaimConditionResized exists on claims served by a warm Sandbox that had to be resized (pool
// annotations paddock.dev/idle-cpu, idle-memory, or a claim choosing paddock.dev/cpu, memory), and
// on claims that gave such a Sandbox up: it mirrors the Sandbox's Resized condition. The claim is
// not Ready before it is True.
const ClaimConditionResized = "Resized"

// Reasons of the Resized condition that the claim controller sets itself; others are the
// Sandbox's (agents v1beta1 SandboxReasonResize*).
const (
	// ClaimReasonResizeFellBack: the node could not fit the resize (Infeasible, or Deferred for
	// longer than the controller waits) or refused it; the warm Sandbox was deleted and a cold
	// one created, which the scheduler places where it fits.
	ClaimReasonResizeFellBack = "ResizeFellBack"
	// ClaimReasonResourcesOutOfBounds: the claim's paddock.dev/cpu or paddock.dev/memory is not
	// a quantity, or above its pool's bounds; the message names the annotation and the bound. Also
	// a Ready reason: the claim gets no Sandbox until it is fixed.
	ClaimReasonResourcesOutOfBounds = "ResourcesOutOfBounds"
)
