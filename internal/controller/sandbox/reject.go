package sandbox

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// Back-off of the Pod that replaces one the kubelet rejected at admission: the first new Pod
// follows after podRetryBase, each further rejection in a row doubles the wait up to podRetryMax.
// A rejection usually reflects a moment (the kubelet still counting Pods being torn down), so
// the first retry is quick; a node that keeps refusing costs at most two Pod writes a minute.
const (
	podRetryBase = time.Second
	podRetryMax  = time.Minute
)

// podRetryBackoff is the wait before the Pod that follows the n-th rejection in a row (n >= 1).
func podRetryBackoff(n int) time.Duration {
	d := podRetryBase
	for i := 1; i < n && d < podRetryMax; i++ {
		d *= 2
	}
	return min(d, podRetryMax)
}

// podRetryAt is when the Pod that follows the n-th rejection in a row, seen at now, may be
// created: after podRetryBackoff, rounded up to the second that Ready's message names.
func podRetryAt(n int, now time.Time) time.Time {
	at := now.Add(podRetryBackoff(n))
	if t := at.Truncate(time.Second); !t.Equal(at) {
		at = t.Add(time.Second)
	}
	return at
}

// podRejection is the last Pod of a Sandbox that the kubelet rejected at admission, as the
// controller remembers it until a Pod of the Sandbox starts a container.
type podRejection struct {
	podUID                     string
	pod, node, reason, message string
	// count is how many Pods in a row were rejected; retryAt is when the next Pod may be created.
	count   int
	retryAt time.Time
}

// readyMessage is the Ready condition's message while the Sandbox waits for its next Pod. It
// depends only on what is remembered, so passes during the wait compute the same status.
func (p *podRejection) readyMessage() string {
	return fmt.Sprintf("Pod %q was rejected at admission by node %q (%s: %s); a new Pod follows at %s (rejections in a row: %d)",
		p.pod, p.node, p.reason, p.message, p.retryAt.UTC().Format(time.RFC3339), p.count)
}

// replaceRejectedPod deletes an owned Pod that the kubelet rejected at admission
// (podadmission.Rejected) and remembers the rejection, which holds the next Pod back
// (podRetryBackoff) and is what Ready reports meanwhile. The delete names the Pod's UID: a new
// Pod of the same name is never deleted for an old one's rejection.
func (r *Reconciler) replaceRejectedPod(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, obs *observation) error {
	if pod.DeletionTimestamp.IsZero() {
		if err := r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
			obs.pod, obs.podOwned = pod, true
			return fmt.Errorf("deleting pod %q, which node %q rejected at admission (%s), to replace it: %w", pod.Name, pod.Spec.NodeName, pod.Status.Reason, err)
		}
	}
	// Real time, as in runPod: the wait ends by a requeue, which the work queue counts in real time.
	rej, fresh := r.writes.rememberRejection(client.ObjectKeyFromObject(sb), podRejection{podUID: string(pod.UID), pod: pod.Name,
		node: pod.Spec.NodeName, reason: pod.Status.Reason, message: pod.Status.Message}, time.Now())
	obs.pod, obs.podOwned = nil, false
	obs.rejection = &rej
	// A wait already over (a cache that still shows the deleted Pod) needs no requeue: the Pod's
	// deletion event brings the pass that creates the next one.
	obs.podRetryWait = time.Until(rej.retryAt)
	if fresh {
		obs.rejectedPod = pod
		podRejections.WithLabelValues(pod.Status.Reason).Inc()
		ctrl.LoggerFrom(ctx).V(2).Info("Deleted pod rejected at admission", "pod", klog.KObj(pod), "node", pod.Spec.NodeName,
			"reason", pod.Status.Reason, "rejectionsInARow", rej.count, "retryAt", rej.retryAt)
	}
	return nil
}

// emitRejection reports a Pod this pass deleted because the kubelet rejected it at admission.
func (r *Reconciler) emitRejection(sb *agentsv1beta1.Sandbox, obs *observation) {
	if obs.rejectedPod == nil || obs.rejection == nil {
		return
	}
	r.recorder.Eventf(sb, obs.rejectedPod, corev1.EventTypeWarning, agentsv1beta1.SandboxReasonPodRejected, "ReplacingPod",
		"Node %q rejected pod %q at admission (%s: %s); the pod was deleted and a new one follows at %s",
		obs.rejection.node, obs.rejection.pod, obs.rejection.reason, obs.rejection.message, obs.rejection.retryAt.UTC().Format(time.RFC3339))
}
