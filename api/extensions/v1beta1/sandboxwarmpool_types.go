package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxTemplateRef names a SandboxTemplate in the same namespace.
type SandboxTemplateRef struct {
	// name of the SandboxTemplate.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// SandboxWarmPoolUpdateStrategyType says how a pool replaces members made from an older template.
// +kubebuilder:validation:Enum=Recreate;OnReplenish
type SandboxWarmPoolUpdateStrategyType string

const (
	// RecreateSandboxWarmPoolUpdateStrategyType deletes stale unclaimed members at once.
	RecreateSandboxWarmPoolUpdateStrategyType SandboxWarmPoolUpdateStrategyType = "Recreate"
	// OnReplenishSandboxWarmPoolUpdateStrategyType replaces stale members only as they are claimed
	// or deleted.
	OnReplenishSandboxWarmPoolUpdateStrategyType SandboxWarmPoolUpdateStrategyType = "OnReplenish"
)

// SandboxWarmPoolUpdateStrategy is the pool's rollout behaviour on a template change.
type SandboxWarmPoolUpdateStrategy struct {
	// type is Recreate or OnReplenish (the default).
	// +kubebuilder:default=OnReplenish
	// +optional
	Type SandboxWarmPoolUpdateStrategyType `json:"type,omitempty"`
}

// SandboxWarmPoolSpec is the desired state of a SandboxWarmPool.
type SandboxWarmPoolSpec struct {
	// replicas is the number of unclaimed Sandboxes the pool keeps; 1 when unset. It is the scale
	// subresource's spec, so kubectl scale and a HorizontalPodAutoscaler can set it.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// sandboxTemplateRef names the SandboxTemplate the pool's Sandboxes are made from.
	// +required
	TemplateRef SandboxTemplateRef `json:"sandboxTemplateRef"`

	// updateStrategy says how members made from an older template are replaced.
	// +optional
	UpdateStrategy *SandboxWarmPoolUpdateStrategy `json:"updateStrategy,omitempty"`
}

// SandboxWarmPoolStatus is the observed state of a SandboxWarmPool.
type SandboxWarmPoolStatus struct {
	// replicas is the number of unclaimed members, Ready or not.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of unclaimed members that are Ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// selector is the label selector that matches the pool's members.
	// +optional
	Selector string `json:"selector,omitempty"`

	// observedGeneration is the metadata.generation this status describes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions report why the pool is short of members: TemplateReady (the template exists),
	// MembersCreated (the last creates succeeded, or why they failed) and Progressing (members
	// become Ready rather than being replaced or held). A Paddock addition; clients that do not
	// know it ignore it.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// SandboxWarmPool keeps a number of ready Sandboxes from a template, for claims to take at once.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=swp
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type SandboxWarmPool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the desired state of the pool.
	// +required
	Spec SandboxWarmPoolSpec `json:"spec"`

	// status is the observed state of the pool.
	// +optional
	Status SandboxWarmPoolStatus `json:"status,omitempty,omitzero"`
}

// SandboxWarmPoolList is a list of SandboxWarmPools.
//
// +kubebuilder:object:root=true
type SandboxWarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxWarmPool `json:"items"`
}
