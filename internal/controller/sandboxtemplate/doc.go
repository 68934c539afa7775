// Package sandboxtemplate is the SandboxTemplate controller. Its contract:
//
//   - Every template carries the label sandbox-template-ref-hash=<hash of its name>.
//   - Under networkPolicyManagement Managed (the default) the template controls one
//     NetworkPolicy, "<template>-network-policy", selecting the Pods of every Sandbox made from
//     it: the secure default (ingress only from the router, egress only to public addresses) or
//     the template's own rules. A same-named policy the template does not control is an error,
//     never overwritten. A policy the API server refuses as invalid is a Warning event
//     (NetworkPolicyInvalid) naming spec.networkPolicy and a terminal error, not retried until
//     the template changes.
//   - Under Unmanaged a policy the template controls is deleted; any other is left alone.
//   - The template has no status; garbage collection removes the policy with the template.
package sandboxtemplate
