// Package sandboxclaim is the SandboxClaim controller. Its contract:
//
//   - A claim is bound to at most one Sandbox and a Sandbox to at most one claim. Before it
//     provisions anything a pass looks for a Sandbox already bound to the claim: the one its
//     status names, one labelled with its UID (cache index), one this process bound moments ago
//     (in memory, for cache lag), or the one named after the claim.
//   - Unbound claims without env or volume claim templates take a ready member of their pool
//     from an in-memory queue. Adoption is ONE optimistic-lock merge patch of the Sandbox: the
//     claim becomes its only controller, it gets the claim-uid label (metadata and pod
//     template) and loses the pool's labels. A conflict means someone else changed or took the
//     member; the next candidate is tried. The claim object itself is never updated, only its
//     status, so a warm claim costs the user's create, the adoption patch and one status write.
//   - Members of a template whose runtime is sandboxd (paddock.dev/runtime) start locked. After
//     adoption the claim (and its env, which then may go warm too) is PUT to sandboxd with the
//     member's derived control token, and only then may the claim turn Ready; a 409 is
//     WarmMemberTampered, and it, other refusals, or failures for longer than GiveUpAfter
//     discard the warm Sandbox and fall back to cold (claimsettings.go,
//     docs/design/sandboxd-claim-settings.md).
//   - Otherwise a cold Sandbox named after the claim is created from the pool's template, with
//     the claim's env and volume claim templates injected under the template's policies.
//   - Status mirrors the bound Sandbox (Ready, Finished, name, pod IPs), or says why there is
//     none. Expiry (shutdownTime, ttlSecondsAfterFinished) is marked in status first, then
//     enforced: Retain deletes the Sandbox, Delete/DeleteForeground delete the claim.
package sandboxclaim
