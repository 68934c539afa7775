package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// ShutdownPolicy says what happens when a claim expires.
// +kubebuilder:validation:Enum=Delete;DeleteForeground;Retain
type ShutdownPolicy string

const (
	// ShutdownPolicyDelete deletes the claim, and with it its Sandbox, in the background.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	// ShutdownPolicyDeleteForeground deletes the claim with foreground propagation: the claim
	// stays visible until its Sandbox and Pod are gone.
	ShutdownPolicyDeleteForeground ShutdownPolicy = "DeleteForeground"
	// ShutdownPolicyRetain deletes the Sandbox and keeps the claim with Ready=False, reason
	// ClaimExpired.
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// Lifecycle schedules the expiry of a claim.
type Lifecycle struct {
	// shutdownTime is the absolute time at which the claim expires. It is enforced by the claim
	// controller and not copied to the Sandbox.
	// +kubebuilder:validation:Format="date-time"
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// ttlSecondsAfterFinished expires the claim this many seconds after its Sandbox's Pod
	// finished (the Finished condition's lastTransitionTime).
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// shutdownPolicy is Retain (the default), Delete or DeleteForeground.
	// +kubebuilder:default=Retain
	// +optional
	ShutdownPolicy ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// SandboxWarmPoolRef names a SandboxWarmPool in the same namespace.
type SandboxWarmPoolRef struct {
	// name of the SandboxWarmPool.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// EnvVar is an environment variable a claim asks for.
type EnvVar struct {
	// name of the variable.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`

	// value of the variable.
	// +required
	Value string `json:"value"`

	// containerName is the container that gets the variable; the first container when empty.
	// +optional
	ContainerName string `json:"containerName,omitempty"`
}

// SandboxClaimSpec is the desired state of a SandboxClaim.
type SandboxClaimSpec struct {
	// warmPoolRef names the pool to take a Sandbox from; the pool's template describes it.
	// +required
	WarmPoolRef SandboxWarmPoolRef `json:"warmPoolRef"`

	// lifecycle schedules the claim's expiry.
	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`

	// additionalPodMetadata adds labels and annotations to the Sandbox's Pod. Keys under the
	// reserved agents.x-k8s.io/ prefixes are refused.
	// +optional
	AdditionalPodMetadata agentsv1beta1.PodMetadata `json:"additionalPodMetadata,omitempty"`

	// env adds environment variables to the Sandbox, subject to the template's
	// envVarsInjectionPolicy. A claim with env is always served by a new (cold) Sandbox.
	// +optional
	// +listType=atomic
	Env []EnvVar `json:"env,omitempty"`

	// volumeClaimTemplates adds volume claim templates to the Sandbox, subject to the template's
	// volumeClaimTemplatesPolicy. A claim with them is always served by a new (cold) Sandbox.
	// +optional
	// +listType=atomic
	VolumeClaimTemplates []agentsv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
}

// SandboxClaimSandboxStatus describes the Sandbox bound to a claim.
type SandboxClaimSandboxStatus struct {
	// name of the bound Sandbox.
	// +optional
	Name string `json:"name,omitempty"`

	// podIPs are the IP addresses of the Sandbox's Pod.
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`
}

// SandboxClaimStatus is the observed state of a SandboxClaim.
type SandboxClaimStatus struct {
	// conditions are Ready and Finished, mirrored from the bound Sandbox.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// sandbox describes the bound Sandbox.
	// +optional
	Sandbox SandboxClaimSandboxStatus `json:"sandbox,omitempty,omitzero"`
}

// SandboxClaim asks for a Sandbox from a warm pool: a ready member at once when there is one,
// otherwise a new Sandbox from the pool's template.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sandboxclaim
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Sandbox",type="string",JSONPath=".status.sandbox.name"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type SandboxClaim struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the desired state of the claim.
	// +required
	Spec SandboxClaimSpec `json:"spec"`

	// status is the observed state of the claim.
	// +optional
	Status SandboxClaimStatus `json:"status,omitempty,omitzero"`
}

// SandboxClaimList is a list of SandboxClaims.
//
// +kubebuilder:object:root=true
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxClaim `json:"items"`
}
