// Package core declares, as kubebuilder RBAC markers, the least privilege the Sandbox controller
// needs. `make generate` turns them into config/rbac/core/role.yaml.
//
// Pods and Services are created, adopted, relabelled and deleted (suspend, expiry, a Pod the
// kubelet rejected at admission). Volume claims are created and adopted but never deleted:
// garbage collection removes them with the Sandbox.
// Sandboxes are deleted only on expiry with shutdownPolicy Delete.
//
// Secrets: the controller creates the credentials key Secret in its namespace at start, and the
// per-Sandbox "<sandbox>-credentials" Secret in every sandbox namespace (never deleted: garbage
// collection removes it with its Sandbox). list and watch serve a cache that holds only Secrets
// carrying the sandbox tracking label, so a deleted credentials Secret is re-created at once;
// RBAC cannot narrow a watch by label, so the grant covers every Secret (docs/security.md).
//
// ServiceAccounts are read (get only) for their imagePullSecrets, with which the controller reads
// what an injected image runs when the pod template lists none (docs/byo-image.md).
//
// The suspend that keeps memory (snapshots.paddock.dev/suspend: memory) creates privileged node
// Pods in the controller's namespace (covered by the pods rule), reads RuntimeClasses (get) to
// know whether a Sandbox runs under gVisor and Nodes (get) to know whether a checkpoint's node is
// still there. The verb restore on memoryimages.snapshots.paddock.dev is no API resource: the
// admission policy paddock-restore-from lets only holders of it cluster-wide create Pods that
// restore a memory image (config/admission/restore-from-policy.yaml).
//
// TokenReviews and SubjectAccessReviews authenticate and authorize the callers of /metrics
// (--metrics-secure).
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=pods;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
// +kubebuilder:rbac:groups=snapshots.paddock.dev,resources=memoryimages,verbs=restore
package core
