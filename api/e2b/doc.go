// Package e2b is E2B's vocabulary as Paddock's E2B front door speaks it: the control plane's
// wire types, header names, ports, sandbox IDs and data-plane addresses, API keys, and the keys
// of the objects the front door reads and writes. It has no client and no server, so the CLI,
// the dev cluster, the benchmark and tests import it instead of the server
// (internal/router/e2b), as api/sandboxd serves sandboxd.
package e2b
