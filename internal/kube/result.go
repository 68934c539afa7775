package kube

import (
	"context"
	"errors"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Result is what a reconciler returns for a pass that scheduled res and met err, the one rule
// all four controllers follow. controller-runtime ignores a result returned next to an error, so:
//   - an error a retry can fix is returned alone, and the work queue's backoff retries the pass;
//     joined with terminal errors, only the retryable ones are returned, since controller-runtime
//     would not retry an error that wraps a terminal one;
//   - a terminal error (reconcile.TerminalError: a user error that waits for the object to
//     change) is returned alone when nothing is scheduled, which logs and counts it without a
//     retry; when res schedules a requeue (an expiry, a grace period), the requeue must still
//     happen, so the error is logged here and res returned;
//   - creates refused because the namespace is being deleted are not retried by backoff (the
//     refusal repeats until the namespace is gone): the pass looks again after
//     TerminatingRecheck, or sooner when res asks.
func Result(ctx context.Context, res ctrl.Result, err error) (ctrl.Result, error) {
	retryable := retryableOf(err)
	switch {
	case err == nil:
		return res, nil
	case retryable != nil && onlyNamespaceTerminating(retryable):
		after := TerminatingRecheck
		if res.RequeueAfter > 0 && res.RequeueAfter < after {
			after = res.RequeueAfter
		}
		ctrl.LoggerFrom(ctx).V(1).Info("Namespace is being deleted; creating nothing in it", "reason", err.Error(), "requeueAfter", after)
		return ctrl.Result{RequeueAfter: after}, nil
	case retryable != nil:
		return ctrl.Result{}, retryable
	case res.RequeueAfter > 0:
		ctrl.LoggerFrom(ctx).Error(err, "Reconciler error; waiting for a change, not retrying", "requeueAfter", res.RequeueAfter)
		return res, nil
	default:
		return ctrl.Result{}, err
	}
}

// retryableOf returns the errors in err, through nested errors.Join, that are not terminal.
func retryableOf(err error) error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		if errors.Is(err, reconcile.TerminalError(nil)) {
			return nil
		}
		return err
	}
	var retryable []error
	for _, e := range joined.Unwrap() {
		if e := retryableOf(e); e != nil {
			retryable = append(retryable, e)
		}
	}
	return errors.Join(retryable...)
}
