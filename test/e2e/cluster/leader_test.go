package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/internal/naming"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// sleeper is a Sandbox whose busybox container sleeps, with the marker on its command line.
func sleeper(name, ns string) *agentsv1beta1.Sandbox {
	return builder.MakeSandbox(name, ns).PodSpec(corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr[int64](1),
		Containers: []corev1.Container{{
			Name: "main", Image: *imageFlag,
			Command: []string{"sh", "-c", "sleep 3600; : " + marker},
		}},
	}).Obj()
}

// leaseHolder returns the Pod holding the controller's leader-election Lease and how many times
// the Lease changed hands. A holder identity is "<pod name>_<uuid>".
func leaseHolder(ctx context.Context, c client.Client) (pod string, transitions int32, err error) {
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: paddockNamespace, Name: manager.NewOptions().LeaderElectionID}, lease); err != nil {
		return "", 0, err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return "", 0, fmt.Errorf("lease %s has no holder", lease.Name)
	}
	pod, _, _ = strings.Cut(*lease.Spec.HolderIdentity, "_")
	if lease.Spec.LeaseTransitions != nil {
		transitions = *lease.Spec.LeaseTransitions
	}
	return pod, transitions, nil
}

// controllerPods lists the controller's Pods that are Running and not deleting.
func controllerPods(ctx context.Context, c client.Client) ([]string, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(paddockNamespace), client.MatchingLabels{"app.kubernetes.io/name": controllerName}); err != nil {
		return nil, err
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// nodeOf returns the node a controller Pod runs on.
func nodeOf(t *testing.T, ctx context.Context, c client.Client, pod string) string {
	t.Helper()
	p := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: paddockNamespace, Name: pod}, p); err != nil {
		t.Fatal(err)
	}
	return p.Spec.NodeName
}

// setUnschedulable cordons or uncordons a node, as kubectl cordon does.
func setUnschedulable(t *testing.T, ctx context.Context, c client.Client, name string, unschedulable bool) {
	t.Helper()
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Unschedulable = unschedulable
	if err := c.Patch(ctx, node, patch); err != nil {
		t.Fatalf("setting node %s unschedulable=%t: %v", name, unschedulable, err)
	}
}

// testLeaderFailover runs against two controller replicas with --leader-elect: it deletes the
// Pod holding the Lease, waits for the Lease to pass to the other replica, and proves the new
// leader reconciles: a Sandbox created afterwards becomes Ready with exactly one Pod.
func testLeaderFailover(t *testing.T, c client.Client) {
	ctx := framework.Context(t, 6*time.Minute)
	var leader string
	var before int32
	var replicas []string
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		var err error
		if leader, before, err = leaseHolder(ctx, c); err != nil {
			return err
		}
		if replicas, err = controllerPods(ctx, c); err != nil {
			return err
		}
		if len(replicas) != 2 || !slices.Contains(replicas, leader) {
			return fmt.Errorf("lease held by %q; running controller Pods %v, want 2 including the holder", leader, replicas)
		}
		return nil
	})
	standby := replicas[0]
	if standby == leader {
		standby = replicas[1]
	}
	t.Logf("leader %s, standby %s, lease transitions %d", leader, standby, before)

	// The Deployment replaces the deleted Pod at once, and a fresh replica may win the Lease
	// before the standby's next retry. Cordoning the node keeps the replacement Pending, so the
	// Lease can only go to the standby, which is what this test is about.
	node := nodeOf(t, ctx, c, standby)
	setUnschedulable(t, ctx, c, node, true)
	t.Cleanup(func() { setUnschedulable(t, context.Background(), c, node, false) })

	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: paddockNamespace, Name: leader}}); err != nil {
		t.Fatalf("deleting the leader's Pod %s: %v", leader, err)
	}
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		holder, transitions, err := leaseHolder(ctx, c)
		if err != nil {
			return err
		}
		if holder != standby || transitions <= before {
			return fmt.Errorf("lease held by %s (transitions %d), want the standby %s after more than %d transitions", holder, transitions, standby, before)
		}
		return nil
	})
	setUnschedulable(t, ctx, c, node, false)

	ns := namespace(t)
	sb := sleeper("after-failover", ns)
	framework.MustCreate(t, ctx, c, sb)
	waitSandboxReady(t, c, sb)
	// Two controllers acting at once would show as a second Pod for the Sandbox.
	framework.EventuallyWithin(t, time.Minute, func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.SandboxNameHashLabel: naming.NameHash(sb.Name)}); err != nil {
			return err
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		if len(names) != 1 || names[0] != sb.Name {
			return fmt.Errorf("Sandbox %s has Pods %v, want exactly [%s]", sb.Name, names, sb.Name)
		}
		return nil
	})
}
