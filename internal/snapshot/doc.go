// Package snapshot holds what the snapshot controller and the node-side capture share: the
// result a capture Pod reports in its termination message. The capture itself (pausing the
// container, reading its writes) lives in the subpackages; this package has no I/O.
package snapshot
