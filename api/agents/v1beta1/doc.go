// Package v1beta1 holds the agents.x-k8s.io/v1beta1 API: the Sandbox, one stateful, addressable
// singleton Pod with optional persistent storage, a headless Service, suspend and resume, and
// scheduled expiry. The wire format matches the kubernetes-sigs/agent-sandbox project.
//
// +kubebuilder:object:generate=true
// +groupName=agents.x-k8s.io
package v1beta1
