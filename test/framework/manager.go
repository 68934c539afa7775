package framework

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paddock-dev/paddock/internal/controller/indexes"
)

// ManagerOptions adjusts the manager StartManager builds.
type ManagerOptions func(*manager.Options)

// StartManager builds a controller-runtime manager on the Env with every field index registered
// through indexes.Register (as the real controller manager does), lets setup add controllers,
// starts it and waits for its caches. No metrics or health server listens. The returned function
// stops the manager and waits for it.
func (e *Env) StartManager(setup func(ctrl.Manager) error, opts ...ManagerOptions) (stop func(), err error) {
	o := manager.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 ctrl.Log,
	}
	for _, opt := range opts {
		opt(&o)
	}
	mgr, err := ctrl.NewManager(e.Config, o)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := indexes.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		cancel()
		return nil, err
	}
	if err := setup(mgr); err != nil {
		cancel()
		return nil, fmt.Errorf("setting up controllers: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, DefaultTimeout)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		cancel()
		return nil, fmt.Errorf("manager caches did not sync: %v", <-done)
	}
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintf(os.Stderr, "manager stopped with error: %v\n", err)
			}
		case <-time.After(DefaultTimeout):
			fmt.Fprintln(os.Stderr, "manager did not stop in time")
		}
	}, nil
}

// Get re-reads obj from the API server (not a cache) into obj.
func Get(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
}

// MustCreate creates obj or fails the test.
func MustCreate(t testing.TB, ctx context.Context, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}
