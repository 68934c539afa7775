// Package imageconfig reads what an image runs (its config's Entrypoint and Cmd) from its
// registry, as the kubelet would pull it: for the node's platform, anonymously or with the
// credentials of the Pod's imagePullSecrets. The Sandbox controller uses it to start an image's
// own process under an injected sandboxd when the template names no command (docs/byo-image.md).
//
// A Reader caches what it read for a while per namespace and image, so a pool of a hundred
// members costs one registry round trip, and a tag moved in the registry is seen within the TTL.
// Failures are not cached: the controller retries with its back-off.
package imageconfig
