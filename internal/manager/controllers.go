package manager

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/paddock-dev/paddock/internal/controller/indexes"
	"github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/internal/version"
)

// SetupControllers registers the cache indexes and the controllers o enables.
func SetupControllers(ctx context.Context, mgr ctrl.Manager, o *Options) error {
	if err := indexes.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return setupSandbox(mgr, o)
}

// RegisterMetrics registers Paddock's own metrics next to controller-runtime's. Call it once per
// process.
func RegisterMetrics(reg prometheus.Registerer, mgr ctrl.Manager) error {
	return errors.Join(
		reg.Register(version.NewCollector()),
		sandbox.RegisterMetrics(reg, mgr.GetClient()),
	)
}

func setupSandbox(mgr ctrl.Manager, o *Options) error {
	r, err := sandbox.New(mgr.GetClient(), mgr.GetScheme(), mgr.GetEventRecorder(sandbox.ControllerName),
		sandbox.WithClusterDomain(o.ClusterDomain), sandbox.WithWorkers(o.SandboxWorkers))
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Sandbox controller: %w", err)
	}
	return nil
}
