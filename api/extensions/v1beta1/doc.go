// Package v1beta1 holds the extensions.agents.x-k8s.io/v1beta1 API: SandboxTemplate (a reusable
// blueprint with a managed NetworkPolicy), SandboxWarmPool (N ready Sandboxes from a template)
// and SandboxClaim (a request for a Sandbox, served warm from a pool or cold). The wire format
// matches the kubernetes-sigs/agent-sandbox project.
//
// +kubebuilder:object:generate=true
// +groupName=extensions.agents.x-k8s.io
package v1beta1
