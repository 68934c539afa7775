package sandboxclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

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
	if v, ok := r.firstSeen.Load(claim.UID); ok {
		return v.(time.Time)
	}
	return r.opts.Clock.Now()
}
