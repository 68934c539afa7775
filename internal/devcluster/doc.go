// Package devcluster runs a real single-node Kubernetes cluster plus KWOK fake nodes on one
// machine, without Docker, for development and end-to-end tests (`paddock dev up|down|status`).
//
// Every component is a host process started in its own session, with its pid file and log under
// one state directory, so the cluster outlives the command that started it and `down` finds
// everything again. The recipe is /work/shared/guides/LOCAL-CLUSTER.md: etcd, kube-apiserver,
// controller manager, scheduler, containerd + runc + the CNI bridge, one kubelet, an in-process OCI
// registry on loopback, CoreDNS on the node address, kube-router's network policy controller
// (NetworkPolicy is enforced), the internet stand-in (internal/standin) in a network namespace of
// its own, a hostPath dynamic provisioner and KWOK. Policy routing keeps every packet of the pods
// on the machine: from the pod bridge only the pod and stand-in ranges are routed. The kubelet
// runs its QoS and pod cgroups under a cgroup root of the cluster's own (KubeletCgroupRoot), which
// in-place Pod resize and the per-pod limits need.
//
// Pure parts (configuration, flag validation, rendered files and arguments) are table-tested;
// the rest is proven by test/e2e/cluster.
package devcluster
