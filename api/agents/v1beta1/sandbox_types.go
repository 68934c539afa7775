package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodMetadata is the subset of object metadata that a template may set on the Pod it describes.
type PodMetadata struct {
	// labels are copied onto the Pod, except keys under the agents.x-k8s.io/ and
	// extensions.agents.x-k8s.io/ prefixes, which are reserved for the controllers.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are copied onto the Pod, except keys under the agents.x-k8s.io/ and
	// extensions.agents.x-k8s.io/ prefixes and opentelemetry.io/trace-context.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// EmbeddedObjectMetadata is the metadata a volume claim template may carry.
type EmbeddedObjectMetadata struct {
	// name of the template. The PersistentVolumeClaim made from it is named
	// "<name>-<sandbox name>", and the Pod mounts it as a volume called "<name>".
	// +optional
	Name string `json:"name,omitempty"`

	// labels are copied onto the PersistentVolumeClaim.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are copied onto the PersistentVolumeClaim.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplate describes the Pod that backs a Sandbox.
type PodTemplate struct {
	// spec is the Pod's spec. The Pod is created from it once; later edits apply to the next
	// Pod (after a resume or a deletion), never to a running one.
	// +required
	Spec corev1.PodSpec `json:"spec"`

	// metadata holds the labels and annotations of the Pod. Other metadata fields are ignored.
	// +optional
	ObjectMeta PodMetadata `json:"metadata"`
}

// PersistentVolumeClaimTemplate describes a PersistentVolumeClaim that lives as long as its
// Sandbox: it survives suspension, expiry with the Retain policy, and Pod restarts.
type PersistentVolumeClaimTemplate struct {
	// metadata names the claim and sets its labels and annotations.
	// +optional
	EmbeddedObjectMetadata `json:"metadata"`

	// spec is the PersistentVolumeClaim's spec, used verbatim.
	// +required
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// SandboxOperatingMode is the state a Sandbox is asked to be in.
type SandboxOperatingMode string

const (
	// SandboxOperatingModeRunning keeps a Pod running for the Sandbox.
	SandboxOperatingModeRunning SandboxOperatingMode = "Running"
	// SandboxOperatingModeSuspended deletes the Pod and keeps storage and Service.
	SandboxOperatingModeSuspended SandboxOperatingMode = "Suspended"
)

// ShutdownPolicy says what happens to an expired Sandbox object.
// +kubebuilder:validation:Enum=Delete;Retain
type ShutdownPolicy string

const (
	// ShutdownPolicyDelete deletes the Sandbox, and with it its volume claims, on expiry.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	// ShutdownPolicyRetain keeps the Sandbox and its volume claims on expiry and reports it expired.
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// SandboxBlueprint is the workload shape shared by Sandbox and SandboxTemplate.
type SandboxBlueprint struct {
	// podTemplate describes the Pod of the sandbox. A Sandbox made from a SandboxTemplate gets
	// automountServiceAccountToken: false unless the template sets it.
	// +required
	PodTemplate PodTemplate `json:"podTemplate"`

	// volumeClaimTemplates lists the PersistentVolumeClaims made for the sandbox and mounted
	// into its Pod. The list is atomic and immutable once set.
	// +optional
	// +listType=atomic
	VolumeClaimTemplates []PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// service controls the headless Service named after the sandbox: true creates and keeps it,
	// false deletes an owned one, and unset keeps an existing owned Service without creating one.
	// +optional
	Service *bool `json:"service,omitempty"`
}

// Lifecycle schedules the expiry of a Sandbox.
type Lifecycle struct {
	// shutdownTime is the absolute time at which the sandbox expires. On expiry the Pod and
	// Service are deleted; volume claims follow shutdownPolicy.
	// +kubebuilder:validation:Format="date-time"
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// shutdownPolicy says whether the Sandbox object itself is deleted on expiry (Delete) or
	// kept with Ready=False, reason SandboxExpired (Retain).
	// +kubebuilder:default=Retain
	// +optional
	ShutdownPolicy *ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// SandboxSpec is the desired state of a Sandbox.
// +kubebuilder:validation:XValidation:rule="has(self.volumeClaimTemplates) == has(oldSelf.volumeClaimTemplates) && (!has(self.volumeClaimTemplates) || self.volumeClaimTemplates == oldSelf.volumeClaimTemplates)",message="volumeClaimTemplates is immutable"
type SandboxSpec struct {
	SandboxBlueprint `json:",inline"`

	Lifecycle `json:",inline"`

	// operatingMode is Running (the default) to keep a Pod, or Suspended to delete the Pod while
	// keeping volume claims and Service. Setting it back to Running resumes on the same storage.
	// +kubebuilder:default=Running
	// +kubebuilder:validation:Enum=Running;Suspended
	// +optional
	OperatingMode SandboxOperatingMode `json:"operatingMode,omitempty"`
}

// SandboxStatus is the observed state of a Sandbox.
type SandboxStatus struct {
	// serviceFQDN is the DNS name of the headless Service,
	// "<service>.<namespace>.svc.<cluster domain>"; empty without a Service.
	// +optional
	ServiceFQDN string `json:"serviceFQDN,omitempty"`

	// service is the name of the headless Service; empty without one.
	// +optional
	Service string `json:"service,omitempty"`

	// conditions are Ready, Suspended, PodScheduled and Finished.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// selector is the label selector that matches the sandbox's Pod.
	// +optional
	LabelSelector string `json:"selector,omitempty"`

	// podIPs are the IP addresses of the sandbox's Pod, one per address family.
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`

	// nodeName is the node the sandbox's Pod is scheduled on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
}

// Sandbox is one isolated, stateful, addressable environment: a singleton Pod named after the
// Sandbox, with optional persistent volume claims and headless Service.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sandbox
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Sandbox struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the desired state of the Sandbox.
	// +required
	Spec SandboxSpec `json:"spec"`

	// status is the observed state of the Sandbox.
	// +optional
	Status SandboxStatus `json:"status,omitempty,omitzero"`
}

// SandboxList is a list of Sandboxes.
//
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}
