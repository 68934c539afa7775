// Package bench measures a controller that serves the agent-sandbox API from the outside: it
// talks only to the API server named by a rest.Config, never to controller internals, so the same
// scenarios run against Paddock, the upstream controller or anything else that serves the API.
//
// A warm scenario fills a SandboxWarmPool, creates SandboxClaims at a fixed rate (or all at once)
// and records, per claim, the time from just before the create call to the first watch event that
// shows the claim Ready=True. A cold scenario creates Sandboxes at once and records the same for
// them. Each scenario also counts the API server's write requests (apiserver_request_total) across
// the phase. Statistics, metrics parsing and rendering are pure functions, tested on their own.
package bench
