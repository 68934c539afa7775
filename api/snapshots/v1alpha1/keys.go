package v1alpha1

// Labels and annotations of the snapshot controller.
const (
	// SnapshotUIDLabel carries the UID of the SandboxSnapshot on its capture Pod, which lives in
	// the controller's namespace (no owner reference can cross namespaces).
	SnapshotUIDLabel = "snapshots.paddock.dev/snapshot-uid"
	// SnapshotAnnotation on a published SandboxTemplate names the SandboxSnapshot it runs.
	SnapshotAnnotation = "snapshots.paddock.dev/snapshot"
	// SnapshotNamespaceAnnotation on a capture Pod names the snapshot's namespace.
	SnapshotNamespaceAnnotation = "snapshots.paddock.dev/namespace"
	// SnapshotNameAnnotation on a capture Pod names the snapshot.
	SnapshotNameAnnotation = "snapshots.paddock.dev/name"
	// SnapshotContainerAnnotation on a capture Pod names the source container it captures.
	SnapshotContainerAnnotation = "snapshots.paddock.dev/container"
)

// Finalizer keeps a snapshot until its capture Pod, which no owner reference collects, is gone.
const Finalizer = "snapshots.paddock.dev/capture-cleanup"
