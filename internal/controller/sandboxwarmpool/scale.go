package sandboxwarmpool

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/podresize"
	"github.com/paddock-dev/paddock/internal/warmpool"
)

// getTemplate reads the pool's template. A missing template is not an error: the pool waits for
// the template watch.
func (r *Reconciler) getTemplate(ctx context.Context, pool *extensionsv1beta1.SandboxWarmPool) (*extensionsv1beta1.SandboxTemplate, error) {
	tpl := &extensionsv1beta1.SandboxTemplate{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.TemplateRef.Name}, tpl)
	switch {
	case err == nil:
		return tpl, nil
	case apierrors.IsNotFound(err):
		ctrl.LoggerFrom(ctx).V(2).Info("Template of warm pool not found; waiting for it", "pool", klog.KObj(pool), "template", pool.Spec.TemplateRef.Name)
		return nil, nil
	default:
		return nil, fmt.Errorf("reading SandboxTemplate %q of warm pool %q: %w", pool.Spec.TemplateRef.Name, pool.Name, err)
	}
}

// listMembers lists the Sandboxes carrying the pool's label, from the cache. The items are the
// cache's own objects, not copies: a pool pass runs on every member event and reads hundreds of
// members, so copying them all would cost more than the rest of the pass. Callers must not
// modify them; pick copies the ones a pass writes.
func (r *Reconciler) listMembers(ctx context.Context, pool *extensionsv1beta1.SandboxWarmPool) ([]agentsv1beta1.Sandbox, error) {
	var list agentsv1beta1.SandboxList
	if err := r.client.List(ctx, &list, client.InNamespace(pool.Namespace), client.UnsafeDisableDeepCopy,
		client.MatchingFields{agentsv1beta1.SandboxWarmPoolIndex: blueprint.PoolHash(pool.Name)}); err != nil {
		return nil, fmt.Errorf("listing members of warm pool %q: %w", pool.Name, err)
	}
	return list.Items, nil
}

// deleteMembers deletes the planned members, each on condition that it is still the version the
// plan saw: a claim adopting a member changes it, and the API server then refuses the delete
// (409) instead of destroying the claim's Sandbox. taken counts those refusals; the pool plans
// again from a fresher cache rather than retrying. Each delete of an owned member is expected
// before it is sent; a failed one is un-expected.
func (r *Reconciler) deleteMembers(ctx context.Context, pool *extensionsv1beta1.SandboxWarmPool, dels []warmpool.Deletion) (taken int, err error) {
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}.String()
	var errs []error
	for _, d := range dels {
		if d.Owned {
			r.expectations.ExpectDelete(key, d.UID)
		}
		sb := &agentsv1beta1.Sandbox{}
		sb.Namespace, sb.Name = pool.Namespace, d.Name
		err := r.client.Delete(ctx, sb, client.Preconditions{UID: &d.UID, ResourceVersion: &d.ResourceVersion})
		if err != nil {
			r.expectations.DeletionObserved(key, d.UID)
			switch {
			case apierrors.IsConflict(err):
				taken++
				ctrl.LoggerFrom(ctx).V(2).Info("Warm pool member changed since the plan (taken by a claim or updated); not deleting it",
					"pool", klog.KObj(pool), "sandbox", d.Name, "reason", d.Reason)
			case !apierrors.IsNotFound(err):
				errs = append(errs, fmt.Errorf("deleting member %q of warm pool %q: %w", d.Name, pool.Name, err))
			}
			continue
		}
		ctrl.LoggerFrom(ctx).V(2).Info("Deleted warm pool member", "pool", klog.KObj(pool), "sandbox", d.Name, "reason", d.Reason)
	}
	return taken, errors.Join(errs...)
}

// adoptOrphans takes over fresh members that lost their controller reference.
func (r *Reconciler) adoptOrphans(ctx context.Context, pool *extensionsv1beta1.SandboxWarmPool, members []agentsv1beta1.Sandbox, names []string) error {
	var errs []error
	for _, sb := range pick(members, names) {
		orig := sb.DeepCopy()
		sb.OwnerReferences = append(sb.OwnerReferences, blueprint.ControllerRef("SandboxWarmPool", pool))
		sb.Labels[agentsv1beta1.LaunchTypeLabel] = agentsv1beta1.LaunchTypeWarm
		// The optimistic lock keeps a claim's concurrent adoption of the same Sandbox intact.
		if err := r.client.Patch(ctx, sb, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("adopting orphan %q into warm pool %q: %w", sb.Name, pool.Name, err))
		}
	}
	return errors.Join(errs...)
}

// relabel sets launch-type=warm on owned members that lack it.
func (r *Reconciler) relabel(ctx context.Context, members []agentsv1beta1.Sandbox, names []string) error {
	var errs []error
	for _, sb := range pick(members, names) {
		orig := sb.DeepCopy()
		sb.Labels[agentsv1beta1.LaunchTypeLabel] = agentsv1beta1.LaunchTypeWarm
		if err := r.client.Patch(ctx, sb, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("labelling member %q launch-type=warm: %w", sb.Name, err))
		}
	}
	return errors.Join(errs...)
}

func memberUIDs(members []agentsv1beta1.Sandbox) []types.UID {
	uids := make([]types.UID, len(members))
	for i := range members {
		uids[i] = members[i].UID
	}
	return uids
}

func pick(members []agentsv1beta1.Sandbox, names []string) []*agentsv1beta1.Sandbox {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []*agentsv1beta1.Sandbox
	for i := range members {
		if want[members[i].Name] {
			out = append(out, members[i].DeepCopy())
		}
	}
	return out
}

// createMembers creates n members in slow-start batches. All n creates are expected up front;
// each create that fails or is never sent is un-expected, so the pool is never stuck waiting for
// a member that will not come.
func (r *Reconciler) createMembers(ctx context.Context, pool *extensionsv1beta1.SandboxWarmPool, tpl *extensionsv1beta1.SandboxTemplate, n int) (created int, _ error) {
	if n <= 0 {
		return 0, nil
	}
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}.String()
	r.expectations.ExpectCreates(key, n)
	sent := 0
	idle, _ := podresize.Idle(pool.Annotations) // creationBlocker refuses bad values before any create
	opts := blueprint.PoolOptions{SafeToEvict: r.opts.SafeToEvict, Idle: idle}
	for _, size := range warmpool.Batches(n) {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for range size {
			wg.Go(func() {
				sb := blueprint.PoolMember(pool, tpl, opts)
				err := r.createNamed(ctx, sb)
				if err == nil {
					r.expectations.Created(key, sb.UID)
					mu.Lock()
					created++
					mu.Unlock()
				} else {
					r.expectations.CreationObserved(key)
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		sent += size
		if len(errs) > 0 {
			for range n - sent {
				r.expectations.CreationObserved(key)
			}
			return created, fmt.Errorf("creating members of warm pool %q from template %q: %w", pool.Name, tpl.Name, errors.Join(errs...))
		}
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Created warm pool members", "pool", klog.KObj(pool), "count", n)
	return created, nil
}

// memberNameAttempts bounds the names tried for one member: a clash among 5 random characters
// is rare, two in a row rarer still.
const memberNameAttempts = 3

// createNamed creates a member under a name chosen here, in the API server's generateName
// format, so that its pod-name annotation is part of the create rather than a later patch.
func (r *Reconciler) createNamed(ctx context.Context, sb *agentsv1beta1.Sandbox) error {
	prefix := sb.GenerateName
	var err error
	for range memberNameAttempts {
		blueprint.NameMember(sb, prefix, utilrand.String(5))
		if err = r.client.Create(ctx, sb); !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return fmt.Errorf("no free name for a member with prefix %q after %d attempts: %w", prefix, memberNameAttempts, err)
}
