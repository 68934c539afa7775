// Package podadmission recognises a Pod that the kubelet refused at admission (phase Failed, the
// refusal's reason in status.reason) and that never started a container: nothing of the
// workload ran, so a new Pod loses nothing and may well be admitted. The reasons are those
// k8s.io/kubernetes pkg/kubelet/lifecycle/predicate.go gives for refusals where the node, not
// the Pod's spec, is the obstacle (docs/design/pod-rejection.md).
//
// Everything here is pure: no client, no context, no logging.
package podadmission
