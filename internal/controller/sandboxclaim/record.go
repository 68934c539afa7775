package sandboxclaim

// What a pass does after its status write: events, metrics and the observability annotations.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// recordBinding emits the event and counts the metric of a binding made in this pass. It runs
// after the status write, so observers see the status before the event.
func (r *Reconciler) recordBinding(_ context.Context, claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, launch string) {
	if sb == nil || launch == "" {
		return
	}
	countCreation(claim, sb, launch)
	if launch == agentsv1beta1.LaunchTypeWarm {
		r.event(claim, corev1.EventTypeNormal, ReasonSandboxAdopted, "Adoption", fmt.Sprintf("Adopted warm pool Sandbox %q", sb.Name))
	} else {
		r.event(claim, corev1.EventTypeNormal, ReasonSandboxProvisioned, "Provisioning", fmt.Sprintf("Created Sandbox %q", sb.Name))
	}
}

// recordReady observes the startup latencies once, when this process's status write turned the
// claim Ready.
func (r *Reconciler) recordReady(claim, original *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) {
	if !isReady(claim) || isReady(original) {
		return
	}
	observeStartup(claim, sb, r.memory.of(claim.UID).firstSeen, r.opts.Clock.Now())
}

func (r *Reconciler) event(obj runtime.Object, eventType, reason, action, note string) {
	r.recorder.Eventf(obj, nil, eventType, reason, action, "%s", note)
}

// annotateObservability writes, with Options.ObservabilityAnnotations, the claim annotations
// upstream's tools read: the bound Sandbox's name and when this controller first saw the claim.
// It runs only once the claim's Ready status is written, as a metadata patch of its own, so it
// never delays Ready; a first-observed time already recorded is kept.
func (r *Reconciler) annotateObservability(ctx context.Context, claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) error {
	if !r.opts.ObservabilityAnnotations || sb == nil || !isReady(claim) {
		return nil
	}
	want := map[string]string{}
	if claim.Annotations[extensionsv1beta1.AssignedSandboxNameAnnotation] != sb.Name {
		want[extensionsv1beta1.AssignedSandboxNameAnnotation] = sb.Name
	}
	if _, ok := claim.Annotations[extensionsv1beta1.ControllerFirstObservedAtAnnotation]; !ok {
		want[extensionsv1beta1.ControllerFirstObservedAtAnnotation] = r.firstSeenAt(claim).UTC().Format(time.RFC3339Nano)
	}
	if len(want) == 0 {
		return nil
	}
	// A merge patch of the two keys alone, without resourceVersion: nothing else writes them, and
	// a pass on a stale cache that sends the same values again changes nothing on the server.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want}})
	if err != nil {
		return err
	}
	if err := r.client.Patch(ctx, claim, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing the observability annotations of claim %s/%s: %w", claim.Namespace, claim.Name, err))
	}
	return nil
}

// firstSeenAt is when this process first saw the claim (observe records it at the start of
// every pass).
func (r *Reconciler) firstSeenAt(claim *extensionsv1beta1.SandboxClaim) time.Time {
	if seen := r.memory.of(claim.UID).firstSeen; !seen.IsZero() {
		return seen
	}
	return r.opts.Clock.Now()
}
