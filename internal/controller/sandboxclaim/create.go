package sandboxclaim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/kube"
)

// createCold creates the claim's own Sandbox, named after the claim. The name makes the create
// idempotent: AlreadyExists means a Sandbox exists that the cache has not shown yet.
// It reports whether this call created it.
func (r *Reconciler) createCold(ctx context.Context, claim *extensionsv1beta1.SandboxClaim, tpl *extensionsv1beta1.SandboxTemplate) (*agentsv1beta1.Sandbox, bool, error) {
	sb, err := blueprint.ColdSandbox(claim, tpl)
	if err != nil {
		return nil, false, err
	}
	err = r.client.Create(ctx, sb)
	if apierrors.IsAlreadyExists(err) {
		sb, err := r.resolveExisting(ctx, claim)
		return sb, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("creating Sandbox %q from template %q: %w", sb.Name, tpl.Name, err)
	}
	r.memory.of(claim.UID).binding = &binding{name: sb.Name}
	ctrl.LoggerFrom(ctx).V(2).Info("Created cold Sandbox", "claim", klog.KObj(claim), "sandbox", sb.Name)
	return sb, true, nil
}

// resolveExisting asks the API server about the Sandbox named after the claim.
func (r *Reconciler) resolveExisting(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	sb := &agentsv1beta1.Sandbox{}
	err := r.reader.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}, sb)
	switch {
	case apierrors.IsNotFound(err):
		return nil, newError(errCreatePending, "Sandbox already created; waiting for cache to converge")
	case err != nil:
		return nil, fmt.Errorf("reading Sandbox %q: %w", claim.Name, err)
	case blueprint.ControlledBy(sb, claim):
		r.memory.of(claim.UID).binding = &binding{name: sb.Name}
		return sb, nil
	default:
		return nil, newError(errNotControlled, "sandbox %q is not controlled by claim %q (its controller is %s). Please use a different claim name or delete the sandbox manually",
			sb.Name, claim.Name, kube.DescribeController(sb))
	}
}
