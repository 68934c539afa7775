package sandbox

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
)

// A finalizer added by someone else starts a pass: the Sandbox watch filters with
// kube.BeyondStatus, as the claim controller's does (SetupWithManager says why). The Sandbox is
// Suspended (no Pod) and already carries a trace context (no metadata patch), so once its status
// is written nothing but the finalizer can bring another pass: a watch that ignored finalizer
// changes would leave this test waiting for a pass that never comes.
func TestFinalizerChangeStartsAPass(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("finalized", ns).Suspended().Annotation(agentsv1beta1.TraceContextAnnotation, "{}").Obj()
	create(t, ctx, sb)
	waitSandbox(t, sb, condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodTerminated))

	finalized := sb.DeepCopy()
	patch := []byte(`{"metadata":{"finalizers":["test.paddock.dev/keep"]}}`)
	if err := env.Client.Patch(ctx, finalized, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("adding a finalizer to sandbox %s: %v", key(sb), err)
	}
	t.Cleanup(func() { forceDelete(t, context.Background(), finalized) })
	waitPassReading(t, sb, 0, finalized.ResourceVersion) // the one with the finalizer
}
