// Package v1alpha1 holds the snapshots.paddock.dev/v1alpha1 API, Paddock's own group (upstream
// agent-sandbox has no snapshot API): SandboxSnapshot, a capture of what a running Sandbox wrote
// to a container's root filesystem, stored as an OCI image and published as a SandboxTemplate in
// the same namespace (docs/design/snapshots.md).
//
// +kubebuilder:object:generate=true
// +groupName=snapshots.paddock.dev
package v1alpha1
