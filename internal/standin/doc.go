// Package standin is the local cluster's internet stand-in: a network namespace of its own on
// the machine, with addresses in a range outside every cluster range (198.19.64.0/24 by
// default), a few named hosts under the reserved .test TLD that serve HTTP and HTTPS with a
// certificate chain of their own, and a DNS resolver that answers those names and nothing else.
// Sandboxes on the local cluster resolve through it, so tests of egress (allow and deny lists,
// proxies, header injection) have real servers to reach and never send a packet off the machine.
//
// The contract:
//   - Run serves from inside the namespace. The process that calls it must have been started in
//     a network namespace of its own (CLONE_NEWNET): the process holds the namespace, nothing is
//     bind-mounted under /run/netns. It waits for its end of the link (Attach), configures it,
//     then serves until its context ends.
//   - Attach (from the host) links the namespace to the host with a veth pair and routes the
//     stand-in range to it; Detach removes the link, and with it the route.
//   - Names must end in .test (RFC 6761: never delegated), so no query for them can leak to a
//     real resolver. The resolver never forwards: any other name is NXDOMAIN.
//   - The CA (ca.crt, ca.key) lives in the state directory given to Run and is made once; tests
//     and sandboxes trust ca.crt. Leaf certificates are issued in memory for each host.
//   - Client talks to a running stand-in over its control socket in the state directory: add a
//     host by name (it resolves and serves at once), list hosts, read the requests each host saw
//     (with their headers: the sandbox cannot read this log, tests can).
//
// Plan, the DNS answers and the address plan are pure and table-tested; the rest is proven by
// test/e2e/cluster.
package standin
