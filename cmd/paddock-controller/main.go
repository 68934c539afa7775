// Command paddock-controller runs the Paddock controllers: Sandbox always, and with --extensions
// also SandboxTemplate, SandboxWarmPool and SandboxClaim.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/internal/version"
)

func main() {
	opts := manager.NewOptions()
	opts.AddFlags(flag.CommandLine)
	logOpts := zap.Options{}
	logOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	if opts.ShowVersion {
		fmt.Println("paddock-controller", version.Get())
		return
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "paddock-controller: invalid flags:\n%v\n", err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&logOpts)))
	if err := run(opts); err != nil {
		ctrl.Log.Error(err, "paddock-controller stopped")
		os.Exit(1)
	}
}

func run(opts *manager.Options) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the cluster (in-cluster config, --kubeconfig or KUBECONFIG): %w", err)
	}
	mgr, err := manager.NewManager(cfg, manager.NewScheme(), opts)
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	tp, shutdownTracing, err := manager.NewTracerProvider(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err := shutdownTracing(context.Background()); err != nil {
			ctrl.Log.Error(err, "flushing traces")
		}
	}()
	if err := manager.SetupControllers(ctx, mgr, opts, tp); err != nil {
		return err
	}
	if err := manager.RegisterMetrics(metrics.Registry, mgr.GetClient(), opts); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	ctrl.Log.Info("starting", "version", version.Get().GitVersion, "extensions", opts.Extensions)
	return mgr.Start(ctx)
}
