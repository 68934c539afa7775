// Package sandbox implements the Sandbox controller: for every agents.x-k8s.io Sandbox it keeps
// one Pod named after the Sandbox (created from spec.podTemplate, never updated in place except
// its metadata), one PersistentVolumeClaim per volume claim template, and, when asked, a headless
// Service named after the Sandbox. Every child carries a controller owner reference to the
// Sandbox; no finalizers are used, garbage collection removes children with their Sandbox.
//
// Contract, in the words of the API:
//   - operatingMode Suspended deletes the owned Pod and keeps volume claims and Service; Running
//     recreates a missing Pod. A Pod in a terminal phase is reported, never replaced, except one
//     the kubelet rejected at admission before any container started (podadmission.Rejected):
//     it is deleted with a PodRejected Warning event, Ready says PodRejected, and the next Pod
//     follows after a per-Sandbox back-off (reject.go, docs/design/pod-rejection.md).
//   - An object the Sandbox does not control is adopted only when labelled adoptable=true or
//     carrying this Sandbox's name-hash label; an object controlled by someone else is never
//     touched and turns Ready False with reason ReconcilerError.
//   - More than one owned Pod stops all Pod and Service work (Ready False, MultiplePods).
//   - A child the API server refuses as invalid (a Pod from a spec.podTemplate that the Sandbox's
//     schema admits but a Pod's does not) turns Ready False with reason ReconcilerError naming
//     the field to fix; like MultiplePods, the error is terminal: no retry until the Sandbox
//     changes.
//   - shutdownTime expires a Sandbox in two passes: first Ready=SandboxExpired is written, then
//     the owned Pod and Service are deleted and, with shutdownPolicy Delete, the Sandbox itself.
//   - Status is computed from observation on every pass and written at most once per pass, only
//     when it changed; events follow a successful status write. A pass that reads a Sandbox older
//     than the controller's own last write waits for the cache instead of writing again; a change
//     that only reports a Sandbox still starting up waits up to --sandbox-status-coalesce-window,
//     and a new nodeName alone rides with the next write. Updates that change only the status
//     start no pass. Every such memory of a Sandbox is one writeMemory entry (writes.go).
//   - With a credentials key (Options.CredentialsKey, manager --sandbox-credentials) every Sandbox
//     gets Secret "<sandbox>-credentials" with its derived sandbox and control tokens before its
//     Pod, and every container gets them by secretKeyRef; a deleted Secret is re-created, a
//     foreign Secret of that name blocks the Pod (docs/design/credentials.md).
//   - With a write-behind window (--sandbox-write-behind-window, capped at 1s) the metadata patch
//     of an already-owned Pod, and nothing else, waits until the window since the Pod was first
//     found out of date has passed; edits within it reach the Pod in one patch.
//   - A Pod created with an egress policy (paddock.dev/egress) trusts the installation's egress
//     CA (Options.EgressCASecret): Secret "paddock-egress-ca" of the namespace gets the CA's
//     certificate and a bundle of roots plus it, never the key, and every regular container
//     mounts it with SSL_CERT_FILE and friends pointing there (egressca.go). No CA yet gives no
//     trust; a foreign Secret of that name blocks the Pod. Pods without a policy are unchanged.
//   - With snapshots.paddock.dev/suspend: rootfs (Options.SuspendCaptures, rootfs.go), the Pod of
//     a suspended Sandbox is deleted only once a SandboxSnapshot the Sandbox controls has
//     captured its first container; a failed capture keeps the Pod. The next Pod runs the newest
//     capture's image, older captures are deleted, and RootfsKept says which image and why.
//
// Unlike upstream, the Pod's hostname defaults to the Sandbox name, and a Sandbox controlled by a
// SandboxClaim puts the claim's UID and name on its Pod (see docs/compatibility.md).
package sandbox
