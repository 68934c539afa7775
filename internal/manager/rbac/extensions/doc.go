// Package extensions declares, as kubebuilder RBAC markers, the least privilege the
// SandboxTemplate, SandboxWarmPool and SandboxClaim controllers need on top of the core role.
// `make generate` turns them into config/rbac/extensions/role.yaml.
//
// Pools and claims create, adopt and delete Sandboxes; autosized pools write their own
// spec.replicas through the scale subresource; claims are deleted on expiry with the
// Delete policies; templates get a label and a NetworkPolicy. Snapshots create capture Pods (the core role's
// pods verbs) and publish the SandboxTemplates they control. Claim settings need no Secret: the
// control token is derived from the key the core role's controller holds.
//
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=snapshots.paddock.dev,resources=sandboxsnapshots,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=snapshots.paddock.dev,resources=sandboxsnapshots/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=snapshots.paddock.dev,resources=sandboxsnapshots/finalizers,verbs=update
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools/scale,verbs=get;update;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list
package extensions
