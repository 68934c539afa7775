package sandbox

import (
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/test/builder"
)

// Without --sandbox-write-behind-window (this package's reconciler runs with the default 0) the
// pass that first sees a template edit patches the Pod itself; the write-behind package proves
// the held-back behaviour.
func TestWriteBehindOffPatchesInThePassThatSeesTheEdit(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("immediate", ns).PodLabel("stage", "1").Obj()
	create(t, ctx, sb)
	waitPod(t, key(sb), nil)
	nextCompletedPass(t, ctx, sb) // settle: later passes are not skipped for a stale cache

	n := len(ops.Passes(sb))
	edited := sb.DeepCopy()
	edit := []byte(`{"spec":{"podTemplate":{"metadata":{"labels":{"stage":"2"}}}}}`)
	if err := env.Client.Patch(ctx, edited, client.RawPatch("application/merge-patch+json", edit)); err != nil {
		t.Fatalf("editing sandbox %s: %v", key(sb), err)
	}
	pass := waitPassReading(t, sb, n, edited.ResourceVersion)
	touch(t, ctx, sb)
	waitPasses(t, sb, pass+2)
	if writes := ops.Passes(sb)[pass]; !slices.Contains(writes, "patch Pod") {
		t.Errorf("the pass that saw the edit wrote %v, want it to patch the Pod", writes)
	}
}
