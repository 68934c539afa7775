// Package sandboxdclient is the controllers' side of sandboxd's control protocol: the calls the
// claim and idle controllers make to the sandboxd in a Sandbox's Pod. Its contract:
//
//   - Every call names the Sandbox it is for. The client derives that Sandbox's control token
//     from the installation's credentials key (internal/credentials) and sends it as a bearer
//     token; without a key it sends none (a sandboxd run with --allow-unauthenticated).
//   - The address is the Sandbox's first status.podIPs entry and sandboxd's REST port
//     (api/sandboxd.RESTPort); a Sandbox without a pod IP fails with ErrNoAddress before anything
//     is sent. Requests go straight to the Pod, never through a proxy from the controller's
//     environment, which must not see the token, and give up after DefaultTimeout.
//   - A call is one request. An answer other than 200 is a *StatusError carrying sandboxd's
//     status and message; Permanent tells a refusal that the same request will meet again (400,
//     401, 403, 404, 409, 413) from a failure that may pass. A call's own doc says what its
//     endpoint's statuses mean beyond that.
//   - The client keeps no state about Sandboxes: when to call, retry or give up is the caller's
//     policy.
//
// Adding a call is one method: a call value (method, path, request and answer bodies) passed to
// do, and the mapping of the statuses its endpoint gives a meaning of its own.
package sandboxdclient
