package kube

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestRefusedAsInvalid(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.Required(field.NewPath("spec", "containers"), "")})
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("changed"))
	for _, tt := range []struct {
		name         string
		err          error
		wantTerminal bool
	}{
		{name: "nil"},
		{name: "invalid", err: invalid, wantTerminal: true},
		{name: "wrapped invalid", err: fmt.Errorf("creating pod: %w", invalid), wantTerminal: true},
		{name: "every joined error invalid", err: fmt.Errorf("creating members: %w", errors.Join(invalid, invalid)), wantTerminal: true},
		{name: "invalid joined with a conflict", err: fmt.Errorf("creating members: %w", errors.Join(invalid, conflict))},
		{name: "conflict", err: conflict},
		{name: "plain error", err: errors.New("connection refused")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := RefusedAsInvalid(tt.err)
			if terminal := errors.Is(got, reconcile.TerminalError(nil)); terminal != tt.wantTerminal {
				t.Errorf("RefusedAsInvalid(%v) = %v, terminal %v; want terminal %v", tt.err, got, terminal, tt.wantTerminal)
			}
			if !errors.Is(got, tt.err) {
				t.Errorf("RefusedAsInvalid(%v) = %v, which no longer wraps the error", tt.err, got)
			}
		})
	}
}
