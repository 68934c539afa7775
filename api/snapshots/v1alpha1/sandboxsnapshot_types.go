package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SnapshotPhase is where a snapshot is in its life.
// +kubebuilder:validation:Enum=Pending;Capturing;Ready;Failed
type SnapshotPhase string

const (
	// SnapshotPhasePending waits for the source Sandbox to be Ready.
	SnapshotPhasePending SnapshotPhase = "Pending"
	// SnapshotPhaseCapturing runs the capture on the source's node.
	SnapshotPhaseCapturing SnapshotPhase = "Capturing"
	// SnapshotPhaseReady has the image stored and the template published.
	SnapshotPhaseReady SnapshotPhase = "Ready"
	// SnapshotPhaseFailed is terminal; the Captured condition names the cause. Create a new
	// snapshot to try again.
	SnapshotPhaseFailed SnapshotPhase = "Failed"
)

// SnapshotContent is one kind of state a snapshot holds.
// +kubebuilder:validation:Enum=Filesystem;Volumes;Memory
type SnapshotContent string

const (
	// SnapshotContentFilesystem is what the container's processes wrote to its root filesystem.
	SnapshotContentFilesystem SnapshotContent = "Filesystem"
	// SnapshotContentVolumes is the contents of the Sandbox's volumes.
	SnapshotContentVolumes SnapshotContent = "Volumes"
	// SnapshotContentMemory is the running processes and their memory.
	SnapshotContentMemory SnapshotContent = "Memory"
)

// SandboxSnapshotSpec names what to capture. It cannot change once created.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable; create a new SandboxSnapshot to capture again"
type SandboxSnapshotSpec struct {
	// sandboxName is the Sandbox, in the snapshot's namespace, to capture. It must be Ready.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="sandboxName must be a Sandbox name (a DNS subdomain: lower-case alphanumerics, '-' and '.')"
	// +required
	SandboxName string `json:"sandboxName"`

	// containerName is the container whose root filesystem is captured; empty means the first
	// container of the Sandbox's pod template.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Label().validate(self).hasValue()",message="containerName must be a container name (a DNS label)"
	// +optional
	ContainerName string `json:"containerName,omitempty"`

	// templateName is the SandboxTemplate the snapshot publishes, in its namespace, once
	// captured; empty means the snapshot's own name. Claims and warm pools of that template
	// start Sandboxes from the snapshot.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="templateName must be a SandboxTemplate name (a DNS subdomain)"
	// +optional
	TemplateName string `json:"templateName,omitempty"`
}

// SandboxSnapshotStatus is what was captured and where it is stored.
type SandboxSnapshotStatus struct {
	// phase is Pending, Capturing, Ready or Failed.
	// +optional
	Phase SnapshotPhase `json:"phase,omitempty"`

	// contents lists what the image holds.
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	// +optional
	Contents []SnapshotContent `json:"contents,omitempty"`

	// volumes names the Sandbox's volumes (its volumeClaimTemplates mounted by the captured
	// container) whose contents the image holds; a Sandbox started from the snapshot gets them in
	// its new, empty volumes before its containers start. Set with contents Volumes.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	Volumes []string `json:"volumes,omitempty"`

	// image is the captured image as a digest reference (repository@sha256:...).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Image string `json:"image,omitempty"`

	// baseImage is the image the source container ran, by digest.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	BaseImage string `json:"baseImage,omitempty"`

	// sizeBytes is the size of the layer the capture added to the base image.
	// +kubebuilder:validation:Minimum=0
	// +optional
	SizeBytes *int64 `json:"sizeBytes,omitempty"`

	// pausedMilliseconds is how long the source container was frozen for the capture.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PausedMilliseconds *int64 `json:"pausedMilliseconds,omitempty"`

	// runtimeClassName is the RuntimeClass the source ran under; empty means the default (runc).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	RuntimeClassName string `json:"runtimeClassName,omitempty"`

	// nodeName is the node the capture ran on.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// containerID is the containerd ID of the captured container: what the resume guard resumes
	// when a capture ended without resuming it (a capture Pod killed with SIGKILL).
	// +kubebuilder:validation:MaxLength=128
	// +optional
	ContainerID string `json:"containerID,omitempty"`

	// templateName is the SandboxTemplate published for this snapshot.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	TemplateName string `json:"templateName,omitempty"`

	// captureStartTime is when the capture Pod was created.
	// +optional
	CaptureStartTime *metav1.Time `json:"captureStartTime,omitempty"`

	// completionTime is when the snapshot became Ready or Failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Captured, TemplateReady, Ready and, after a failed capture, SourceResumed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxSnapshot captures a running Sandbox into an image and publishes a SandboxTemplate that
// starts new Sandboxes from it. It belongs to its namespace: only that namespace's claims and
// warm pools can use its template.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sbsnap
// +kubebuilder:printcolumn:name="Sandbox",type="string",JSONPath=".spec.sandboxName"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Template",type="string",JSONPath=".status.templateName"
// +kubebuilder:printcolumn:name="Size",type="integer",JSONPath=".status.sizeBytes"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type SandboxSnapshot struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec names the Sandbox to capture.
	// +required
	Spec SandboxSnapshotSpec `json:"spec"`

	// status is what was captured and where it is stored.
	// +optional
	Status SandboxSnapshotStatus `json:"status,omitempty,omitzero"`
}

// SandboxSnapshotList is a list of SandboxSnapshots.
//
// +kubebuilder:object:root=true
type SandboxSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxSnapshot `json:"items"`
}
