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
	// reserved agents.x-k8s.io/ and extensions.agents.x-k8s.io/ prefixes are refused at
	// admission, and so are keys that are not qualified names and invalid label values.
	// +kubebuilder:validation:XValidation:rule="!has(self.labels) || self.labels.all(k, !k.startsWith('agents.x-k8s.io/') && !k.startsWith('extensions.agents.x-k8s.io/'))",message="additionalPodMetadata.labels: keys under agents.x-k8s.io/ and extensions.agents.x-k8s.io/ are reserved for the controllers; use your own domain prefix",fieldPath=".labels"
	// +kubebuilder:validation:XValidation:rule="!has(self.annotations) || self.annotations.all(k, !k.startsWith('agents.x-k8s.io/') && !k.startsWith('extensions.agents.x-k8s.io/') && k != 'opentelemetry.io/trace-context')",message="additionalPodMetadata.annotations: keys under agents.x-k8s.io/ and extensions.agents.x-k8s.io/ and opentelemetry.io/trace-context are reserved for the controllers; use your own domain prefix",fieldPath=".annotations"
	// +kubebuilder:validation:XValidation:rule="!has(self.labels) || self.labels.all(k, !format.qualifiedName().validate(k).hasValue())",message="additionalPodMetadata.labels: every key must be a qualified name (an optional DNS subdomain prefix and '/', then at most 63 alphanumerics, '-', '_' or '.')",fieldPath=".labels"
	// +kubebuilder:validation:XValidation:rule="!has(self.annotations) || self.annotations.all(k, !format.qualifiedName().validate(k).hasValue())",message="additionalPodMetadata.annotations: every key must be a qualified name (an optional DNS subdomain prefix and '/', then at most 63 alphanumerics, '-', '_' or '.')",fieldPath=".annotations"
	// +optional
	AdditionalPodMetadata AdditionalPodMetadata `json:"additionalPodMetadata,omitempty"`

	// env adds environment variables to the Sandbox, subject to the template's
	// envVarsInjectionPolicy. When the template opts in to claim settings (annotation
	// extensions.agents.x-k8s.io/claim-settings: sandboxd), a warm Sandbox serves the claim: the
	// env is delivered to its sandboxd before the claim turns Ready (condition SettingsDelivered),
	// and a cold Sandbox is created if delivery fails. Otherwise a claim with env is served by a
	// new (cold) Sandbox, with the env in its Pod spec.
	// +optional
	// +listType=atomic
	Env []EnvVar `json:"env,omitempty"`

	// volumeClaimTemplates adds volume claim templates to the Sandbox, subject to the template's
	// volumeClaimTemplatesPolicy. A claim with them is always served by a new (cold) Sandbox.
	// +optional
	// +listType=atomic
	VolumeClaimTemplates []agentsv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
}

// AdditionalPodMetadata is the metadata a claim adds to its Sandbox's Pod. It has the shape of
// the Sandbox's PodMetadata, with bounds that let the API server check every key at admission.
type AdditionalPodMetadata struct {
	// labels are added to the Pod. Keys need a domain prefix from the controller's allow-list.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// annotations are added to the Pod.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// LabelValue is a Kubernetes label value: at most 63 characters, alphanumerics, '-', '_' or '.',
// starting and ending with an alphanumeric, or empty.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

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
