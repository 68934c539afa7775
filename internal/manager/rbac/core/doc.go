// Package core declares, as kubebuilder RBAC markers, the least privilege the Sandbox controller
// needs. `make generate` turns them into config/rbac/core/role.yaml.
//
// Pods and Services are created, adopted, relabelled and deleted (suspend, expiry). Volume claims
// are created and adopted but never deleted: garbage collection removes them with the Sandbox.
// Sandboxes are deleted only on expiry with shutdownPolicy Delete.
//
// +kubebuilder:rbac:groups="",resources=pods;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes/status,verbs=get;update;patch
package core
