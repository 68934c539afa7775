package sdk

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// terminalReasons are Ready=False reasons of a claim that waiting will not fix.
var terminalReasons = map[string]bool{
	extensionsv1beta1.ClaimReasonTemplateNotFound:          true,
	extensionsv1beta1.ClaimReasonWarmPoolNotFound:          true,
	extensionsv1beta1.ClaimReasonInvalidMetadata:           true,
	extensionsv1beta1.ClaimReasonEnvVarsInjectionRejected:  true,
	extensionsv1beta1.ClaimReasonVolumeClaimTemplatesError: true,
	extensionsv1beta1.ClaimReasonExpired:                   true,
	extensionsv1beta1.ClaimReasonSandboxExpired:            true,
	// The claim mirrors its Sandbox's Ready: an image or pod template that cannot host sandboxd.
	agentsv1beta1.SandboxReasonImageIncompatible: true,
	agentsv1beta1.SandboxReasonInjectionInvalid:  true,
	// Its image's config cannot be read, and not for a blip (ImageConfigRetrying waits).
	agentsv1beta1.SandboxReasonImageConfigUnreadable: true,
}

// waiter is the state of one wait: what the object last said, so a timeout can say why.
type waiter struct {
	object, namespace, name string
	last                    metav1.Condition
}

func (w *waiter) fail(kind error, detail string, err error) *ClaimError {
	return &ClaimError{Kind: kind, Object: w.object, Namespace: w.namespace, Name: w.name, Reason: w.last.Reason,
		Message: w.last.Message, Detail: detail, Err: err}
}

// claimReady is the condition of a claim wait: done when the claim is Ready and bound to a
// Sandbox; a terminal error on deletion or on a reason waiting will not fix.
func (w *waiter) claimReady(ev watch.Event) (bool, error) {
	claim, ok := ev.Object.(*extensionsv1beta1.SandboxClaim)
	if !ok {
		return false, nil
	}
	if ev.Type == watch.Deleted {
		return false, w.fail(ErrSandboxGone, "claim was deleted while waiting for Ready", nil)
	}
	ready := meta.FindStatusCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady)
	if ready == nil {
		return false, nil
	}
	w.last = *ready
	switch {
	case ready.Status == metav1.ConditionTrue && claim.Status.Sandbox.Name != "":
		return true, nil
	case ready.Status == metav1.ConditionFalse && terminalReasons[ready.Reason]:
		return false, w.fail(ErrClaimFailed, "controller reported a reason that waiting will not fix", nil)
	}
	return false, nil
}

// sandboxCondition returns the condition of a Sandbox wait: done when condType is True at the
// generation the caller wrote (so a stale status from before the change does not count).
func (w *waiter) sandboxCondition(condType string, generation int64) watchtools.ConditionFunc {
	return func(ev watch.Event) (bool, error) {
		sb, ok := ev.Object.(*agentsv1beta1.Sandbox)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			return false, w.fail(ErrSandboxGone, "sandbox was deleted while waiting for "+condType, nil)
		}
		c := meta.FindStatusCondition(sb.Status.Conditions, condType)
		if c == nil {
			return false, nil
		}
		w.last = *c
		return c.Status == metav1.ConditionTrue && c.ObservedGeneration >= generation, nil
	}
}

// until watches one object until cond holds, resuming dropped watches by re-listing
// (watchtools.UntilWithSync). An object already gone is ErrSandboxGone; the context ending is
// ErrNotReady carrying the last condition seen.
func (w *waiter) until(ctx context.Context, lw cache.ListerWatcher, obj runtime.Object, cond watchtools.ConditionFunc) (runtime.Object, error) {
	present := func(store cache.Store) (bool, error) {
		if _, exists, err := store.GetByKey(w.namespace + "/" + w.name); err != nil || !exists {
			return false, w.fail(ErrSandboxGone, "object does not exist", err)
		}
		return false, nil
	}
	ev, err := watchtools.UntilWithSync(ctx, lw, obj, present, cond)
	var ce *ClaimError
	switch {
	case errors.As(err, &ce):
		return nil, err
	case err != nil && ctx.Err() != nil:
		return nil, w.fail(ErrNotReady, "gave up waiting", context.Cause(ctx))
	case err != nil:
		return nil, w.fail(ErrNotReady, "watch failed", err)
	}
	return ev.Object, nil
}

// listWatch lists and watches the one object named name through a controller-runtime client.
type listWatch struct{ cache.ListWatch }

// IsWatchListSemanticsUnSupported makes the reflector use a plain LIST then WATCH, which every
// API server and every client.WithWatch (including fakes) supports.
func (listWatch) IsWatchListSemanticsUnSupported() bool { return true }

func newListWatch(c client.WithWatch, namespace, name string, newList func() client.ObjectList) *listWatch {
	opts := func(raw metav1.ListOptions) *client.ListOptions {
		return &client.ListOptions{Namespace: namespace, Raw: &raw,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name)}
	}
	return &listWatch{cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, raw metav1.ListOptions) (runtime.Object, error) {
			// The reflector lists at resourceVersion "0", which the API server may answer from a
			// watch cache that has not yet seen the claim this client created a moment ago: the
			// wait would then report a live object gone. Ask for a consistent read instead.
			raw.ResourceVersion, raw.ResourceVersionMatch = "", ""
			list := newList()
			if err := c.List(ctx, list, opts(raw)); err != nil {
				return nil, fmt.Errorf("listing %s/%s: %w", namespace, name, err)
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, raw metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, newList(), opts(raw))
		},
	}}
}
