package kube

import (
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// TerminatingRecheck is how long a controller holds its creates in a namespace after the API
// server refused one there because the namespace is being deleted. The refusal repeats until the
// namespace is gone; a namespace of the same name made afterwards waits at most this long.
const TerminatingRecheck = 30 * time.Second

// ErrNamespaceTerminating is returned for a create that was not sent because the API server
// refused one in the same namespace lately: the namespace is being deleted.
var ErrNamespaceTerminating = errors.New("namespace is being deleted")

// NamespaceTerminating reports whether err, or an error wrapped or joined in it, is the API
// server's refusal to create an object in a namespace that is being deleted (or
// ErrNamespaceTerminating, its remembered form).
func NamespaceTerminating(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNamespaceTerminating) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return true
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if NamespaceTerminating(e) {
				return true
			}
		}
	}
	return false
}

// onlyNamespaceTerminating reports whether every error in err's tree that is not a wrapper is a
// namespace-terminating refusal.
func onlyNamespaceTerminating(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs := joined.Unwrap()
		for _, e := range errs {
			if !onlyNamespaceTerminating(e) {
				return false
			}
		}
		return len(errs) > 0
	}
	return NamespaceTerminating(err)
}

// TerminatingNamespaces remembers the namespaces in which the API server refused a create
// because the namespace is being deleted, so that a controller sends no further creates there
// until TerminatingRecheck has passed. A namespace stuck in Terminating (its Pods cannot be torn
// down) then costs one refused create per recheck, not one per pass and object. Safe for
// concurrent use; the zero value is not: build it with NewTerminatingNamespaces.
type TerminatingNamespaces struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	until map[string]time.Time
}

// NewTerminatingNamespaces returns an empty memory that reads the time from clk (the real clock
// when nil).
func NewTerminatingNamespaces(clk clock.PassiveClock) *TerminatingNamespaces {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &TerminatingNamespaces{clock: clk, until: map[string]time.Time{}}
}

// Observe records the outcome of a create in namespace: a namespace-terminating refusal holds
// further creates there.
func (t *TerminatingNamespaces) Observe(namespace string, err error) {
	if !NamespaceTerminating(err) || errors.Is(err, ErrNamespaceTerminating) {
		return
	}
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for ns, until := range t.until { // namespaces gone long ago must not pile up
		if !now.Before(until) {
			delete(t.until, ns)
		}
	}
	t.until[namespace] = now.Add(TerminatingRecheck)
}

// Held returns how much longer creates in namespace are held; 0 when they may be sent.
func (t *TerminatingNamespaces) Held(namespace string) time.Duration {
	t.mu.Lock()
	until, ok := t.until[namespace]
	t.mu.Unlock()
	if !ok {
		return 0
	}
	return max(until.Sub(t.clock.Now()), 0)
}

// Check returns ErrNamespaceTerminating, naming namespace and what was not created, while
// creates in namespace are held; nil otherwise.
func (t *TerminatingNamespaces) Check(namespace, what string) error {
	if wait := t.Held(namespace); wait > 0 {
		return fmt.Errorf("not creating %s: %w (the API server refused a create in namespace %q; looking again in %s)",
			what, ErrNamespaceTerminating, namespace, wait.Round(time.Second))
	}
	return nil
}
