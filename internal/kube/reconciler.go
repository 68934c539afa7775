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

// RefusedAsInvalid wraps err terminal when the API server refused a write as invalid (422): the
// object was computed from what a user wrote and admitted, and sending it again cannot succeed
// until they change it, which the controller's watch brings. Other errors are returned as they
// are.
func RefusedAsInvalid(err error) error {
	if apierrors.IsInvalid(err) {
		return reconcile.TerminalError(err)
	}
	return err
}
