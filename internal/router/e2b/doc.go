// Package e2b is paddock-router's E2B-compatible front door: E2B's control-plane REST API
// (create, connect, get, list, timeout, pause, kill) on SandboxClaims, and E2B's data plane
// (E2b-Sandbox-Id/E2b-Sandbox-Port headers or a {port}-{id}.{domain} Host) proxied to the
// claimed Sandbox. docs/design/e2b-front-door.md holds the design and its invariants:
//
//   - an E2B sandbox is one SandboxClaim, named by its E2B sandbox ID, in the namespace its API
//     key is bound to; the front door never writes claim status and never binds a Sandbox;
//   - create costs the claim create and the controller's adoption patch before it answers, and
//     answers only once the sandbox's daemon accepts a request made with its token;
//   - every request is scoped: an API key sees one namespace, a data-plane request reaches a
//     sandbox only with that sandbox's token.
//
// The pure parts (IDs, hosts, the claim and response builders) have no client and no I/O.
package e2b
