// Package sandboxsnapshot is the SandboxSnapshot controller (docs/design/snapshots.md). Its
// contract:
//
//   - A snapshot waits (Pending) until its Sandbox, in its namespace, is Ready and the chosen
//     container runs; a Sandbox that does not exist fails it (SandboxNotFound), one that stays
//     not Ready for ReadyTimeout fails it (SandboxNotReady). Without a repository and a capture
//     image configured it stays Pending (CaptureNotConfigured).
//   - It then creates one capture Pod, "snapshot-<uid>" in the controller's namespace, on the
//     source's node (Capturing). The Pod has no port: the container ID and target repository
//     on its command line are all it acts on, and it reports a snapshot.Result in its
//     termination message. The source template spec travels in the Pod's annotation, so the
//     template can be published even when the Sandbox is gone by then.
//   - A Pod that succeeded with a result makes the snapshot Ready (Captured True); one that
//     failed, or vanished, makes it Failed (CaptureFailed, CaptureLost), never Ready.
//   - A Ready snapshot publishes a SandboxTemplate it controls (spec.templateName, default its
//     name): the source template's spec (or the Sandbox's blueprint) with the captured
//     container's image replaced. A same-named template it does not control is never touched
//     (TemplateConflict). The Ready condition is True when both are done.
//   - The capture Pod is deleted once the snapshot is Ready or Failed and when the snapshot is
//     deleted (finalizer); the template goes with the snapshot by garbage collection.
//   - Capture Pods are read uncached (the manager may cache only sandbox Pods), so the
//     controller polls them while Capturing.
package sandboxsnapshot
