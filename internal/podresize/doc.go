// Package podresize holds the rules of warm resources (docs/design/warm-resources.md): the CPU and
// memory an unclaimed pool member waits with, what a claim may ask for within its pool's bounds,
// how those sizes apply to a container without changing the Pod's QoS class (which in-place
// resize forbids), and what a Pod's status says of a resize the kubelet was asked for.
//
// Everything here is pure: no client, no context, no logging.
package podresize
