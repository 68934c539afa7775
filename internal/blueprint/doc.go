// Package blueprint turns a SandboxTemplate into Sandboxes: the warm-pool member, the cold
// Sandbox of a claim, and the metadata a claim puts on a Sandbox it adopts. It also holds the
// policies a template imposes on claims (environment and volume-claim-template injection,
// additional Pod metadata) and the blueprint hash that decides whether a member is stale.
//
// Everything here is pure: no client, no context, no logging.
package blueprint
