// Package egress is the vocabulary of Paddock's per-sandbox egress policy: the annotation that
// carries it on a SandboxTemplate, a SandboxClaim, a Sandbox and its Pod, and the JSON document
// it holds (docs/design/egress.md). It has no logic: internal/egresspolicy parses, validates
// and decides; internal/egressproxy enforces.
package egress
