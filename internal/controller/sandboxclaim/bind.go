package sandboxclaim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/kube"
)

// bind returns the Sandbox bound to claim, binding one first when there is none: a warm member
// when the claim allows it and one is ready, else a new cold Sandbox. launch is the launch type
// of a binding made in this pass, empty when the claim was bound already.
func (r *Reconciler) bind(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) (sb *agentsv1beta1.Sandbox, launch string, err error) {
	if err := blueprint.ValidateAdditionalMetadata(claim.Spec.AdditionalPodMetadata, r.opts.AllowedLabelDomains); err != nil {
		return nil, "", err
	}
	if sb, err := r.findBound(ctx, claim); err != nil || sb != nil {
		if err == nil {
			err = r.refreshMetadata(ctx, claim, sb)
		}
		return sb, "", err
	}
	pool, tpl, err := r.poolAndTemplate(ctx, claim)
	if err != nil {
		return nil, "", err
	}
	if err := checkResources(claim, pool); err != nil {
		return nil, "", err
	}
	// A claim with env goes warm only through claim settings (claimsettings.go).
	if len(claim.Spec.VolumeClaimTemplates) == 0 && r.servesWarm(claim, tpl) {
		sb, networkPending, err := r.adoptWarm(ctx, claim, pool, tpl)
		if err != nil || sb != nil {
			return sb, agentsv1beta1.LaunchTypeWarm, err
		}
		// A member about to get its IP beats a cold start, for a short while.
		if age := r.opts.Clock.Now().Sub(claim.CreationTimestamp.Time); networkPending && age < warmCandidateGrace {
			return nil, "", &warmWait{retryAfter: min(warmCandidateRetry, warmCandidateGrace-age)}
		}
	}
	sb, created, err := r.createCold(ctx, claim, tpl)
	if created {
		launch = agentsv1beta1.LaunchTypeCold
	}
	return sb, launch, err
}

// findBound looks for a Sandbox the claim controls: the one its status names, one labelled with
// its UID, one this process bound it to moments ago, or the one named after it. Only the
// controller reference decides; names and labels are just where to look.
func (r *Reconciler) findBound(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	if name := claim.Status.Sandbox.Name; name != "" {
		sb, err := r.getSandbox(ctx, claim.Namespace, name)
		if err != nil || (sb != nil && blueprint.ControlledBy(sb, claim)) {
			return sb, err
		}
	}
	var list agentsv1beta1.SandboxList
	if err := r.client.List(ctx, &list, client.InNamespace(claim.Namespace),
		client.MatchingFields{agentsv1beta1.SandboxClaimUIDIndex: string(claim.UID)}); err != nil {
		return nil, fmt.Errorf("listing Sandboxes of claim %q: %w", claim.Name, err)
	}
	if sb := controlledOne(list.Items, claim); sb != nil {
		r.memory.of(claim.UID).binding = nil // the cache shows the binding now
		return sb, nil
	}
	if sb, err := r.legacyAssignment(ctx, claim); err != nil || sb != nil {
		return sb, err
	}
	if sb, err := r.recentBinding(ctx, claim); err != nil || sb != nil {
		return sb, err
	}
	sb := &agentsv1beta1.Sandbox{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}, sb)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Sandbox %q: %w", claim.Name, err)
	case blueprint.ControlledBy(sb, claim):
		return sb, nil
	default:
		return nil, newError(errNotControlled, "sandbox %q is not controlled by claim %q (its controller is %s). Please use a different claim name or delete the sandbox manually",
			sb.Name, claim.Name, kube.DescribeController(sb))
	}
}

// legacyAssignment follows the sandbox-name annotation (or the older label of the same key) that
// upstream controllers write on claims they adopted for; Paddock itself never writes it.
func (r *Reconciler) legacyAssignment(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	name := claim.Annotations[extensionsv1beta1.AssignedSandboxNameAnnotation]
	if name == "" {
		name = claim.Labels[extensionsv1beta1.AssignedSandboxNameAnnotation]
	}
	if name == "" {
		return nil, nil
	}
	sb, err := r.getSandbox(ctx, claim.Namespace, name)
	if err != nil || sb == nil || !blueprint.ControlledBy(sb, claim) {
		return nil, err
	}
	return sb, nil
}

// binding is what this process knows of a binding it made, until the cache shows it.
type binding struct {
	// name is the bound Sandbox; bindingUnknown marks an adoption whose outcome was lost.
	name string
	// adopted is the API server's answer to the adoption patch, and before the resourceVersion of
	// the member the patch was computed from. Both are empty for cold Sandboxes.
	adopted *agentsv1beta1.Sandbox
	before  string
}

// recentBinding resolves a binding this process made that the cache may not show yet: from the
// adoption's own answer while the cache still shows the member as it was before, else by asking
// the API server. An adoption whose outcome was lost is resolved by listing the claim's label
// there.
func (r *Reconciler) recentBinding(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	mem := r.memory.of(claim.UID)
	b := mem.binding
	if b == nil {
		return nil, nil
	}
	if sb := r.unseenAdoption(ctx, claim.Namespace, b); sb != nil {
		return sb, nil
	}
	if name := b.name; name != bindingUnknown {
		// The cache may still hold the member as the pool's: only the API server can tell.
		sb := &agentsv1beta1.Sandbox{}
		err := r.reader.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: name}, sb)
		switch {
		case err == nil && blueprint.ControlledBy(sb, claim):
			return sb, nil
		case err != nil && !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading Sandbox %q bound to claim %q: %w", name, claim.Name, err)
		}
		mem.binding = nil
		return nil, nil
	}
	var list agentsv1beta1.SandboxList
	if err := r.reader.List(ctx, &list, client.InNamespace(claim.Namespace),
		client.MatchingLabels{agentsv1beta1.ClaimUIDLabel: string(claim.UID)}); err != nil {
		return nil, fmt.Errorf("listing Sandboxes of claim %q from the API server: %w", claim.Name, err)
	}
	mem.binding = nil
	if sb := controlledOne(list.Items, claim); sb != nil {
		mem.binding = &binding{name: sb.Name}
		return sb, nil
	}
	return nil, nil
}

// unseenAdoption returns the adoption's answer while the cache shows the member exactly as the
// adoption found it: the cache has not caught up, and its next events will bring whatever
// happened since, so asking the API server would tell this pass nothing it needs. A cache that
// shows any other version (or none) has seen something this process did not do; then it returns
// nil and the caller asks the API server.
func (r *Reconciler) unseenAdoption(ctx context.Context, namespace string, b *binding) *agentsv1beta1.Sandbox {
	if b.adopted == nil {
		return nil
	}
	cached := &agentsv1beta1.Sandbox{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: b.name}, cached); err != nil || cached.ResourceVersion != b.before {
		return nil
	}
	return b.adopted.DeepCopy()
}

func controlledOne(items []agentsv1beta1.Sandbox, claim *extensionsv1beta1.SandboxClaim) *agentsv1beta1.Sandbox {
	for i := range items {
		if blueprint.ControlledBy(&items[i], claim) {
			return &items[i]
		}
	}
	return nil
}

// poolAndTemplate reads the claim's pool and the pool's template from the cache.
func (r *Reconciler) poolAndTemplate(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) (*extensionsv1beta1.SandboxWarmPool, *extensionsv1beta1.SandboxTemplate, error) {
	pool := &extensionsv1beta1.SandboxWarmPool{}
	if err := r.getConfirmed(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, newError(errWarmPoolNotFound, "SandboxWarmPool %q not found", claim.Spec.WarmPoolRef.Name)
		}
		return nil, nil, fmt.Errorf("reading SandboxWarmPool %q: %w", claim.Spec.WarmPoolRef.Name, err)
	}
	tpl := &extensionsv1beta1.SandboxTemplate{}
	if err := r.getConfirmed(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: pool.Spec.TemplateRef.Name}, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, newError(errTemplateNotFound, "SandboxTemplate %q not found", pool.Spec.TemplateRef.Name)
		}
		return nil, nil, fmt.Errorf("reading SandboxTemplate %q: %w", pool.Spec.TemplateRef.Name, err)
	}
	return pool, tpl, nil
}

// getConfirmed reads key from the cache and, when the cache has no such object, from the API
// server: a pool or template created just before its claim (the E2B front door's fork creates
// the pool, then the claims) may not be in the cache yet, and a claim must not be told that
// what it names does not exist. Only a miss costs the API call.
func (r *Reconciler) getConfirmed(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	err := r.client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = r.reader.Get(ctx, key, obj)
	}
	return err
}

// refreshMetadata carries template and claim metadata edits to a bound Sandbox's pod template,
// and back-fills a missing launch type, in one patch. Without additional metadata a missing pool
// or template is only logged: the binding stands.
func (r *Reconciler) refreshMetadata(ctx context.Context, claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) error {
	orig := sb.DeepCopy()
	changed := backfillLaunchType(sb, claim)
	_, tpl, err := r.poolAndTemplate(ctx, claim)
	switch {
	case err != nil && (len(claim.Spec.AdditionalPodMetadata.Labels) > 0 || len(claim.Spec.AdditionalPodMetadata.Annotations) > 0):
		return err
	case err != nil:
		ctrl.LoggerFrom(ctx).V(2).Info("Cannot refresh bound Sandbox metadata", "claim", klog.KObj(claim), "sandbox", sb.Name, "err", err)
	default:
		refreshed, err := blueprint.RefreshClaimMetadata(sb, claim, tpl)
		if err != nil {
			return err
		}
		changed = changed || refreshed
	}
	if !changed {
		return nil
	}
	if err := r.client.Patch(ctx, sb, client.MergeFrom(orig)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("updating metadata of Sandbox %q: %w", sb.Name, err)
	}
	return nil
}
