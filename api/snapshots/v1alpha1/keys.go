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

// Suspend that keeps the root filesystem (docs/design/snapshots.md, "Suspend that keeps the
// root filesystem").
const (
	// SuspendAnnotation set to SuspendRootfs on a Sandbox, a SandboxClaim or a SandboxTemplate
	// (the most specific one wins; the claim's and the template's are stamped on the Sandbox
	// they make) has the Sandbox controller capture the first container's root filesystem into
	// a SandboxSnapshot before it deletes the Pod of a suspended Sandbox, and start the next Pod
	// from that image. Any other value, or none, suspends as upstream: volumes only. Setting it
	// to SuspendRootfs needs create on sandboxsnapshots in the namespace (admission policy
	// paddock-suspend-rootfs, config/admission): a new value that captures must be added there.
	SuspendAnnotation = "snapshots.paddock.dev/suspend"
	// SuspendRootfs is the value of SuspendAnnotation that keeps the root filesystem.
	SuspendRootfs = "rootfs"
	// SuspendMemory is the value of SuspendAnnotation that keeps the memory (and so the running
	// processes) of a Sandbox whose Pod runs under gVisor: its sandbox is checkpointed on its node
	// before the Pod goes, and the next Pod, pinned to that node, restores it
	// (docs/design/snapshots.md, "Memory"). Any other runtime suspends with volumes only.
	// Setting it needs the same rights as SuspendRootfs.
	SuspendMemory = "memory"
	// SuspendPodUIDLabel on a SandboxSnapshot made for a suspension carries the UID of the Pod
	// it captures: one capture per Pod, and a capture of a Pod that keeps running is stale.
	SuspendPodUIDLabel = "snapshots.paddock.dev/suspend-pod-uid"
	// ResumeFromAnnotation on a Sandbox names the SandboxSnapshot, controlled by that Sandbox,
	// whose image its next Pod runs. The Sandbox controller writes it when it deletes the Pod
	// of a captured suspension.
	ResumeFromAnnotation = "snapshots.paddock.dev/resume-from"
)

// Memory checkpoints under gVisor (docs/design/snapshots.md, "Memory").
const (
	// RestoreFromAnnotation on a Pod of RuntimeClass gvisor names a gVisor checkpoint image on
	// the Pod's node (a directory under MemoryImageDir): Paddock's runsc shim
	// (hack/gvisor/gvisor-shim-paddock-restore.patch) restores the sandbox from it instead of
	// booting its containers. containerd passes only this Pod annotation through to runsc.
	RestoreFromAnnotation = "snapshots.paddock.dev/restore-from"
	// MemoryImageDir is where a node keeps gVisor checkpoint images, one root-owned directory
	// each; the shim refuses any other place.
	MemoryImageDir = "/var/lib/paddock/memory"
	// MemorySandboxUIDLabel on a memory node Pod (checkpoint or forget, in the controller's
	// namespace) carries the UID of the Sandbox whose image it writes or removes.
	MemorySandboxUIDLabel = "snapshots.paddock.dev/memory-sandbox-uid"
	// MemoryImageLabel on a memory node Pod carries the image's name (the UID of the Pod that
	// was checkpointed).
	MemoryImageLabel = "snapshots.paddock.dev/memory-image"
	// MemoryOpLabel on a memory node Pod says what it does: MemoryOpCheckpoint or MemoryOpForget.
	MemoryOpLabel = "snapshots.paddock.dev/memory-op"
	// MemoryOpCheckpoint writes an image; a Succeeded checkpoint Pod is the record of the image
	// until its forget Pod has run.
	MemoryOpCheckpoint = "checkpoint"
	// MemoryOpForget removes an image from its node.
	MemoryOpForget = "forget"
	// MemorySandboxNamespaceAnnotation and MemorySandboxNameAnnotation on a memory node Pod name
	// the Sandbox it serves.
	MemorySandboxNamespaceAnnotation = "snapshots.paddock.dev/memory-sandbox-namespace"
	MemorySandboxNameAnnotation      = "snapshots.paddock.dev/memory-sandbox-name"
)
