package v1beta1

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// NetworkPolicyManagement says whether the controller owns the template's NetworkPolicy.
// +kubebuilder:validation:Enum=Managed;Unmanaged
type NetworkPolicyManagement string

const (
	// NetworkPolicyManagementManaged keeps one NetworkPolicy per template: the secure default,
	// or the rules of spec.networkPolicy.
	NetworkPolicyManagementManaged NetworkPolicyManagement = "Managed"
	// NetworkPolicyManagementUnmanaged leaves networking to someone else and deletes a
	// NetworkPolicy the template controls.
	NetworkPolicyManagementUnmanaged NetworkPolicyManagement = "Unmanaged"
)

// EnvVarsInjectionPolicy says whether a claim may set environment variables.
// +kubebuilder:validation:Enum=Allowed;Overrides;Disallowed
type EnvVarsInjectionPolicy string

const (
	// EnvVarsInjectionPolicyAllowed lets a claim add variables the template does not define.
	EnvVarsInjectionPolicyAllowed EnvVarsInjectionPolicy = "Allowed"
	// EnvVarsInjectionPolicyOverrides lets a claim add variables and replace the template's.
	EnvVarsInjectionPolicyOverrides EnvVarsInjectionPolicy = "Overrides"
	// EnvVarsInjectionPolicyDisallowed rejects a claim that sets any variable.
	EnvVarsInjectionPolicyDisallowed EnvVarsInjectionPolicy = "Disallowed"
)

// VolumeClaimTemplatesPolicy says whether a claim may add volume claim templates.
// +kubebuilder:validation:Enum=Disallowed;Allowed;Overrides
type VolumeClaimTemplatesPolicy string

const (
	// VolumeClaimTemplatesPolicyDisallowed rejects a claim that sets volume claim templates.
	VolumeClaimTemplatesPolicyDisallowed VolumeClaimTemplatesPolicy = "Disallowed"
	// VolumeClaimTemplatesPolicyAllowed lets a claim add templates with names the template lacks.
	VolumeClaimTemplatesPolicyAllowed VolumeClaimTemplatesPolicy = "Allowed"
	// VolumeClaimTemplatesPolicyOverrides lets a claim add templates and replace the template's.
	VolumeClaimTemplatesPolicyOverrides VolumeClaimTemplatesPolicy = "Overrides"
)

// NetworkPolicySpec is the part of a NetworkPolicy a template may set. The Pod selector and
// policy types are the controller's: every Pod of the template, both directions.
type NetworkPolicySpec struct {
	// ingress lists the traffic allowed into the sandboxes. Empty denies all ingress.
	// +optional
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`

	// egress lists the traffic allowed out of the sandboxes. Empty denies all egress.
	// +optional
	Egress []networkingv1.NetworkPolicyEgressRule `json:"egress,omitempty"`
}

// SandboxTemplateSpec is a reusable Sandbox blueprint and the policies for claims made from it.
type SandboxTemplateSpec struct {
	agentsv1beta1.SandboxBlueprint `json:",inline"`

	// networkPolicy replaces the secure default policy (ingress from the router only, egress to
	// public addresses only) with these rules. It is ignored when networkPolicyManagement is
	// Unmanaged. One policy serves every sandbox of the template, so edits apply to all of them.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// networkPolicyManagement is Managed (the default) or Unmanaged.
	// +kubebuilder:default=Managed
	// +optional
	NetworkPolicyManagement NetworkPolicyManagement `json:"networkPolicyManagement,omitempty"`

	// envVarsInjectionPolicy says whether a claim's env may add (Allowed) or also replace
	// (Overrides) variables; Disallowed, the default, rejects claims that set env.
	// +kubebuilder:default=Disallowed
	// +optional
	EnvVarsInjectionPolicy EnvVarsInjectionPolicy `json:"envVarsInjectionPolicy,omitempty"`

	// volumeClaimTemplatesPolicy says whether a claim's volumeClaimTemplates may add (Allowed) or
	// also replace (Overrides) the template's; Disallowed, the default, rejects them.
	// +kubebuilder:default=Disallowed
	// +optional
	VolumeClaimTemplatesPolicy VolumeClaimTemplatesPolicy `json:"volumeClaimTemplatesPolicy,omitempty"`
}

// SandboxTemplate is a reusable blueprint for Sandboxes made by warm pools and claims.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=sandboxtemplate
// +kubebuilder:storageversion
type SandboxTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the blueprint and its policies.
	// +required
	Spec SandboxTemplateSpec `json:"spec"`
}

// SandboxTemplateList is a list of SandboxTemplates.
//
// +kubebuilder:object:root=true
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxTemplate `json:"items"`
}
