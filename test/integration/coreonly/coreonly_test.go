// Package coreonly runs the controller manager the way dist/paddock-core.yaml installs it: only
// the core CRDs (Sandbox) exist and the manager runs with --extensions=false.
package coreonly

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.RunMainWithCRDs(m, &env, []string{framework.CoreCRDs})
}

// TestCoreOnlyManagerStartsAndReconciles builds the manager as main does with the extensions
// off: setup must not name an extension kind (their CRDs are absent), the manager must become
// ready, and a Sandbox must get its Pod.
func TestCoreOnlyManagerStartsAndReconciles(t *testing.T) {
	o := manager.NewOptions()
	o.Extensions = false
	o.LeaderElect = false
	o.MetricsBindAddress = "0"
	o.HealthProbeBindAddress = freeAddr(t)
	// The controller creates its credentials key in its own namespace, which an install makes.
	o.CredentialsSecret = env.Namespace(t) + "/" + credentials.KeySecretName
	if err := o.Validate(); err != nil {
		t.Fatalf("options: %v", err)
	}
	mgr, err := manager.NewManager(env.Config, env.Scheme, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := manager.SetupControllers(ctx, mgr, o, noop.NewTracerProvider()); err != nil {
		t.Fatalf("setting up the core-only controllers: %v", err)
	}
	if err := manager.RegisterMetrics(prometheus.NewRegistry(), mgr.GetClient(), o); err != nil {
		t.Fatalf("registering metrics: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with error: %v", err)
		}
	})

	framework.Eventually(t, func(ctx context.Context) error {
		select {
		case err := <-done:
			done <- err // for the cleanup
			return fmt.Errorf("manager stopped: %v", err)
		default:
		}
		return errors.Join(framework.GetOK(ctx, "http://"+o.HealthProbeBindAddress+"/healthz"), framework.GetOK(ctx, "http://"+o.HealthProbeBindAddress+"/readyz"))
	})
	ns := env.Namespace(t)
	tctx := framework.Context(t, framework.DefaultTimeout)
	framework.MustCreate(t, tctx, env.Client, builder.MakeSandbox("core-only", ns).Obj())
	framework.Eventually(t, func(ctx context.Context) error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "core-only"}, &corev1.Pod{})
	})
}

// freeAddr returns a loopback address with a port nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
