package kube

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The four reconcilers are built the same way: New(c, recorder, opts) (*Reconciler, error),
// where c is the manager's cached client, a nil recorder emits no events, zero options take the
// package's DefaultOptions and a negative count or duration is an error naming the option. The
// helpers below are that shared part.

// CheckClient is New's check of its client; what names the reconciler.
func CheckClient(what string, c client.Client) error {
	if c == nil {
		return fmt.Errorf("%s reconciler needs a client", what)
	}
	return nil
}

// Recorder returns recorder, or one that discards events when it is nil.
func Recorder(recorder events.EventRecorder) events.EventRecorder {
	if recorder == nil {
		return noEvents{}
	}
	return recorder
}

type noEvents struct{}

func (noEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

// RefusedAsInvalid wraps err terminal when the API server refused the writes in it as invalid
// (422), every one of them: the objects were computed from what a user wrote and admitted, and
// sending them again cannot succeed until the user changes it, which the controller's watch
// brings. Errors with any other cause in them are returned as they are, to be retried.
func RefusedAsInvalid(err error) error {
	if err != nil && onlyInvalid(err) {
		return reconcile.TerminalError(err)
	}
	return err
}

// onlyInvalid reports whether every error in err's tree that is not a wrapper is an API
// server's Invalid status.
func onlyInvalid(err error) bool {
	switch e := err.(type) {
	case apierrors.APIStatus:
		return apierrors.IsInvalid(err)
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		for _, err := range errs {
			if !onlyInvalid(err) {
				return false
			}
		}
		return len(errs) > 0
	case interface{ Unwrap() error }:
		return onlyInvalid(e.Unwrap())
	default:
		return false
	}
}
