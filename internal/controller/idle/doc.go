// Package idle implements scale to zero: it suspends a Ready Sandbox that has had no activity
// for its idle timeout, as a user's suspension would (operatingMode Suspended, storage and
// Service kept), marked so that the router may wake it (docs/compatibility.md, "Idle policy").
//
// Contract:
//   - The policy is read, never stored by this controller: annotations paddock.dev/idle-timeout
//     and paddock.dev/wake-on-request on the Sandbox, else on its controlling SandboxClaim, else
//     on the SandboxTemplate it was made from. A restart therefore loses nothing.
//   - Activity is learnt without a write per request: sandboxd answers GET /v1/activity (calls,
//     streams, running processes; a running command is activity however quiet), and the router
//     stamps paddock.dev/last-activity at most once a minute per Sandbox it forwards to. This
//     controller asks sandboxd only once the recorded activity is older than the timeout, and
//     writes the annotation only when that answer moves it by a minute or more.
//   - Suspending writes spec.operatingMode Suspended and paddock.dev/suspend-reason Idle (or
//     IdleNoWake when wake-on-request is false) in one optimistic-locked patch, then emits event Idle and counts paddock_idle_suspends_total.
//     The Sandbox controller then reports Suspended=True with reason Idle.
//   - When a suspended-for-idle Sandbox runs again (woken by the router or resumed by hand),
//     the suspend reason is removed, so a later manual suspension is never woken by traffic.
//   - The clock is injected (WithClock); the activity source too (WithActivitySource): the
//     manager passes internal/sandboxdclient, which answers for a Sandbox running no daemon.
package idle
