package kube

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestResult(t *testing.T) {
	transient := errors.New("conflict")
	user := reconcile.TerminalError(errors.New("invalid metadata"))
	later := ctrl.Result{RequeueAfter: time.Minute}
	terminating := fmt.Errorf("creating pod: %w", namespaceTerminatingRefusal("ns"))
	for _, tt := range []struct {
		name    string
		res     ctrl.Result
		err     error
		want    ctrl.Result
		wantErr error
	}{
		{name: "no error keeps the requeue", res: later, want: later},
		{name: "a retryable error drops the requeue", res: later, err: transient, wantErr: transient},
		{name: "a retryable error joined with a user error is retried", res: later, err: errors.Join(user, transient), wantErr: transient},
		{name: "a user error alone is terminal", err: user, wantErr: user},
		{name: "a user error keeps a scheduled requeue", res: later, err: user, want: later},
		{name: "a terminating namespace is looked at again, not retried", err: terminating, want: ctrl.Result{RequeueAfter: TerminatingRecheck}},
		{name: "a terminating namespace keeps a sooner requeue", res: ctrl.Result{RequeueAfter: time.Second}, err: errors.Join(user, terminating),
			want: ctrl.Result{RequeueAfter: time.Second}},
		{name: "a terminating namespace with another error is retried", res: later, err: errors.Join(terminating, transient), wantErr: transient},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Result(context.Background(), tt.res, tt.err)
			if got != tt.want {
				t.Errorf("Result = %+v, want %+v", got, tt.want)
			}
			if (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("Result error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}
