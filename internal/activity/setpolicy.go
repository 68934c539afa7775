package activity

import (
	"context"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SetPolicy writes p onto obj (a Sandbox, SandboxClaim or SandboxTemplate) with one merge patch
// of its annotations; the idle controller picks it up from there. It is the seam for front doors
// that map their own options onto the idle policy (E2B's autoPause and timeout: set on the
// SandboxClaim they create).
func SetPolicy(ctx context.Context, c client.Client, obj client.Object, p Policy) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": p.Annotations()}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return fmt.Errorf("setting the idle policy on %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
