// Package egressproxy enforces sandboxes' egress policies (internal/egresspolicy) on a node:
// a transparent TCP proxy that the node redirects a policed pod's connections to, and the DNS
// server that answers the pod's questions (docs/design/egress.md).
//
// It knows sandboxes only by source address (Server.Set); an address it does not know gets
// nothing. A connection is decided from its original destination and the name the client sent
// (TLS SNI or HTTP Host), checked against the addresses that name resolves to. Plain HTTP is
// proxied request by request, so every Host is checked; TLS is spliced untouched unless the
// sandbox's policy injects headers for the name, when it is terminated with a leaf of the
// per-installation CA and re-originated to the destination with normal verification. A
// policy change re-decides the sandbox's open connections and closes the refused ones.
//
// The node wiring (addresses, iptables, Secrets) is the caller's.
package egressproxy
