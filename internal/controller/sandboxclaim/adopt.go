package sandboxclaim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/warmqueue"
)

// adoptWarm binds the claim to a member of its pool: Ready members first, else the first
// networked one. Members popped but not used go back to the queue; members that are gone,
// taken or (under Recreate) stale are dropped. It returns nil when no member could be adopted;
// networkPending then says whether some member was only waiting for its Pod's IP.
func (r *Reconciler) adoptWarm(ctx context.Context, claim *extensionsv1beta1.SandboxClaim,
	pool *extensionsv1beta1.SandboxWarmPool, tpl *extensionsv1beta1.SandboxTemplate) (_ *agentsv1beta1.Sandbox, networkPending bool, _ error) {
	key := warmqueue.Key{Namespace: claim.Namespace, Pool: pool.Name}
	var putBack []warmqueue.Member
	defer func() {
		for _, m := range putBack {
			r.queue.Add(key, m)
		}
	}()
	var fallback *agentsv1beta1.Sandbox
	for attempts := 0; attempts < maxAdoptionAttempts; {
		m, ok := r.queue.Pop(key)
		if !ok {
			break
		}
		sb, usable, err := r.candidate(ctx, key, m.Name, pool, tpl)
		switch {
		case err != nil:
			putBack = append(putBack, m)
			return nil, false, err
		case !usable:
			continue
		case len(sb.Status.PodIPs) == 0:
			putBack = append(putBack, warmqueue.Member{Name: sb.Name, NodeName: sb.Status.NodeName})
			networkPending = true
			continue
		case !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady):
			if fallback == nil {
				fallback = sb
			} else {
				putBack = append(putBack, m)
			}
			continue
		}
		attempts++
		if adopted, err := r.adopt(ctx, claim, tpl, sb); err != nil || adopted {
			return adoptedOrNil(sb, adopted), false, err
		}
	}
	if fallback == nil {
		return nil, networkPending, nil
	}
	if adopted, err := r.adopt(ctx, claim, tpl, fallback); err != nil || adopted {
		return adoptedOrNil(fallback, adopted), false, err
	}
	return nil, networkPending, nil
}

func adoptedOrNil(sb *agentsv1beta1.Sandbox, adopted bool) *agentsv1beta1.Sandbox {
	if adopted {
		return sb
	}
	return nil
}

// candidate reads a queued member from the cache and reports whether a claim may take it: still
// controlled by the pool, carrying its labels, not deleting, and fresh when the pool recreates
// stale members.
func (r *Reconciler) candidate(ctx context.Context, key warmqueue.Key, name string,
	pool *extensionsv1beta1.SandboxWarmPool, tpl *extensionsv1beta1.SandboxTemplate) (*agentsv1beta1.Sandbox, bool, error) {
	sb := &agentsv1beta1.Sandbox{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: name}, sb); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading warm candidate %q: %w", name, err)
	}
	if owner, ok := AdoptablePool(sb); !ok || owner != pool.Name {
		return nil, false, nil
	}
	recreate := pool.Spec.UpdateStrategy != nil && pool.Spec.UpdateStrategy.Type == extensionsv1beta1.RecreateSandboxWarmPoolUpdateStrategyType
	if recreate && blueprint.Stale(tpl, sb) {
		return nil, false, nil
	}
	return sb, true, nil
}

// AdoptablePool returns the pool a Sandbox is an adoptable member of.
func AdoptablePool(sb *agentsv1beta1.Sandbox) (string, bool) {
	if !sb.DeletionTimestamp.IsZero() || sb.Labels[agentsv1beta1.WarmPoolSandboxLabel] == "" ||
		sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] == "" {
		return "", false
	}
	return blueprint.PoolOf(sb)
}

// adopt is the single write of a warm binding: an optimistic-lock merge patch that makes the
// claim the Sandbox's controller. A conflict means the member changed or was taken since the
// cache saw it; the caller moves on to the next candidate. On success sb holds the result.
func (r *Reconciler) adopt(ctx context.Context, claim *extensionsv1beta1.SandboxClaim,
	tpl *extensionsv1beta1.SandboxTemplate, sb *agentsv1beta1.Sandbox) (bool, error) {
	orig := sb.DeepCopy()
	if err := blueprint.Adopt(sb, claim, tpl); err != nil {
		return false, err
	}
	err := r.client.Patch(ctx, sb, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	switch {
	case err == nil:
		r.memory.of(claim.UID).binding = &binding{name: sb.Name, adopted: sb.DeepCopy(), before: orig.ResourceVersion}
		ctrl.LoggerFrom(ctx).V(2).Info("Adopted warm Sandbox", "claim", klog.KObj(claim), "sandbox", sb.Name)
		return true, nil
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		ctrl.LoggerFrom(ctx).V(4).Info("Warm candidate changed under us; trying the next", "claim", klog.KObj(claim), "sandbox", sb.Name)
		return false, nil
	default:
		// The patch may have been applied with the answer lost: until the API server is asked,
		// the claim must not take another member.
		r.memory.of(claim.UID).binding = &binding{name: bindingUnknown}
		return false, fmt.Errorf("adopting warm Sandbox %q: %w", sb.Name, err)
	}
}
