package framework

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The integration API server runs no scheduler and no kubelet: tests play both by writing Pod
// status (and binding) themselves with these helpers. Each re-reads the Pod and retries on
// conflict, so it can be called while a controller is patching the same Pod.

// PodIP is the address MarkPodReady gives a Pod: in PodCIDR, never routed anywhere.
const PodIP = "198.19.0.10"

// UpdatePodStatus re-reads the Pod named by key, applies mutate to it and writes its status.
func UpdatePodStatus(ctx context.Context, c client.Client, key client.ObjectKey, mutate func(*corev1.Pod)) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, key, pod); err != nil {
			return err
		}
		mutate(pod)
		return c.Status().Update(ctx, pod)
	})
	if err != nil {
		return nil, fmt.Errorf("updating status of pod %s: %w", key, err)
	}
	return pod, nil
}

// MarkPodScheduled sets the Pod's PodScheduled condition True, as the scheduler would.
func MarkPodScheduled(ctx context.Context, c client.Client, key client.ObjectKey) (*corev1.Pod, error) {
	return UpdatePodStatus(ctx, c, key, func(p *corev1.Pod) {
		SetPodCondition(p, corev1.PodScheduled, corev1.ConditionTrue, "")
	})
}

// MarkPodRunning makes the Pod Running and scheduled, with the given IPs, but not Ready.
func MarkPodRunning(ctx context.Context, c client.Client, key client.ObjectKey, ips ...string) (*corev1.Pod, error) {
	return UpdatePodStatus(ctx, c, key, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		SetPodCondition(p, corev1.PodScheduled, corev1.ConditionTrue, "")
		SetPodCondition(p, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady")
		setPodIPs(p, ips)
	})
}

// MarkPodReady makes the Pod Running, scheduled and Ready with the given addresses (PodIP when
// none), as a kubelet would once its containers pass their readiness probes.
func MarkPodReady(ctx context.Context, c client.Client, key client.ObjectKey, ips ...string) (*corev1.Pod, error) {
	if len(ips) == 0 {
		ips = []string{PodIP}
	}
	return UpdatePodStatus(ctx, c, key, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		SetPodCondition(p, corev1.PodScheduled, corev1.ConditionTrue, "")
		SetPodCondition(p, corev1.PodReady, corev1.ConditionTrue, "")
		setPodIPs(p, ips)
	})
}

// SetPodPhase sets only the Pod's phase (Succeeded and Failed also mark it not Ready).
func SetPodPhase(ctx context.Context, c client.Client, key client.ObjectKey, phase corev1.PodPhase) (*corev1.Pod, error) {
	return UpdatePodStatus(ctx, c, key, func(p *corev1.Pod) {
		p.Status.Phase = phase
		if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
			SetPodCondition(p, corev1.PodReady, corev1.ConditionFalse, "PodCompleted")
		}
	})
}

// BindPod assigns the Pod to a node through the binding subresource, as the scheduler does. The
// node need not exist. A bound Pod is deleted gracefully: it stays Terminating, since no kubelet
// confirms the deletion.
func BindPod(ctx context.Context, c client.Client, pod *corev1.Pod, node string) error {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := c.SubResource("binding").Create(ctx, pod, binding); err != nil {
		return fmt.Errorf("binding pod %s to node %q: %w", client.ObjectKeyFromObject(pod), node, err)
	}
	return nil
}

// SetPodCondition sets or replaces one condition of a Pod object in memory.
func SetPodCondition(p *corev1.Pod, t corev1.PodConditionType, status corev1.ConditionStatus, reason string) {
	c := corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: metav1.Now()}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			p.Status.Conditions[i] = c
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, c)
}

func setPodIPs(p *corev1.Pod, ips []string) {
	p.Status.PodIPs = nil
	p.Status.PodIP = ""
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
}
