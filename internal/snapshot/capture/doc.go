// Package capture is the node side of a SandboxSnapshot, run by the capture Pod the controller
// creates (cmd/paddock-snapshot). It pauses one container through containerd, writes what the
// container wrote to its root filesystem as one OCI layer (package layer), resumes the
// container, and pushes the container's image plus that layer to the target repository. The
// container is resumed on every path once a pause was asked for: after the copy, on any error,
// and as soon as the context ends (SIGTERM when the Pod or the snapshot is deleted). Only runc
// containers on an overlay snapshotter are captured so far; gVisor containers are refused with
// a clear error.
package capture
