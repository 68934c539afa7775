// Package e2b is paddock-router's E2B-compatible front door: E2B's control-plane REST API
// (create, connect, get, list, timeout, pause, kill) on SandboxClaims, its snapshot and fork
// calls on SandboxSnapshots, and E2B's data plane
// (E2b-Sandbox-Id/E2b-Sandbox-Port headers or a {port}-{id}.{domain} Host) proxied to the
// claimed Sandbox. E2B's vocabulary (wire types, headers, IDs, keys, ports) is api/e2b.
// docs/design/e2b-front-door.md holds the design and its invariants:
//
//   - an E2B sandbox is one SandboxClaim, named by its E2B sandbox ID, in the namespace its API
//     key is bound to; the front door never writes claim status and never binds a Sandbox;
//   - create costs the claim create and the controller's adoption patch before it answers, and
//     answers only once the sandbox's daemon accepts a request made with its token;
//   - every request is scoped: an API key sees one namespace, a data-plane request reaches a
//     sandbox only with that sandbox's token.
//
// Files: frontdoor.go builds the front door and splits control plane from data plane; api.go is
// the control plane's route table, its API-key check and what every handler shares; one file per
// resource holds its handlers (create.go, sandboxes.go for get/list/kill, lifecycle.go for
// timeout/pause/connect, metrics.go, snapshots.go for createSnapshot, listSnapshots,
// deleteSnapshot and create from a snapshot, fork.go); snapshotref.go maps E2B's snapshot names
// and IDs to objects; lookup.go reads claims and Sandboxes; wait.go waits for a claimed
// sandbox's daemon; dataplane.go proxies data-plane requests; claim.go renders a claim in E2B's
// terms; instrument.go counts requests. The pure parts (request parsing, the claim and response
// builders, snapshot IDs) have no client and no I/O.
package e2b
