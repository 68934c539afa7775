// Package sandboxwarmpool is the SandboxWarmPool controller. Its contract:
//
//   - A pool keeps spec.replicas unclaimed members (Sandboxes labelled warm-pool-sandbox=<hash of
//     the pool name> and controlled by the pool), made from its template with secure defaults.
//   - It never holds more than spec.replicas plus in-flight members: creates and deletes raise
//     in-memory expectations that the Sandbox watch lowers, and nothing is created or scaled
//     down while any are outstanding.
//   - Under the Recreate strategy members made from an older blueprint are replaced; under
//     OnReplenish they stay until claimed. Members not Ready past the grace period are replaced,
//     unless their Pod is unschedulable, in which case they are held and an event says so.
//   - Refills can be paced: a delay after the active count drops, and a per-pool rate limit.
//   - Claimed Sandboxes are no longer members (the claim took the controller reference and the
//     label) and are never touched. Status (replicas, readyReplicas, selector,
//     observedGeneration) is computed from observation every pass and written only on change.
//   - Members the API server refuses as invalid (built from the template) turn MembersCreated
//     False naming the field; the error is terminal, retried only when the pool or its template
//     changes.
//   - A pool with paddock.dev/autosize "true" sizes its own spec.replicas from the claims and
//     start-up times its member watch sees (internal/autosize), writing it through the scale
//     subresource with an Autosized event; bad annotations turn Autosizing False naming them.
package sandboxwarmpool
