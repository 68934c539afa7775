// Package egressnode wires a node's egress proxy (internal/egressproxy) to Kubernetes and to the
// node's firewall (docs/design/egress.md): it watches the Pods on its node that carry an egress
// policy, gives their addresses to the proxy with the Secret values their inject rules name,
// reports the outcome on each Pod, and keeps iptables chains of its own that redirect those
// Pods' TCP and DNS to the proxy and drop the rest of their traffic.
//
// A policy that cannot be applied leaves the previous one in force; a Pod whose first policy
// cannot be applied gets no egress at all. The chains stay when the component stops, so its
// Pods have no egress while it is down; Cleanup removes them.
package egressnode
