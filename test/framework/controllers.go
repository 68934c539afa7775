package framework

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/internal/manager"
)

// StartControllers runs every Paddock controller (core and extensions) in one manager built the
// way main builds it, without leader election or listeners. Use it as a RunMain setup:
// `framework.RunMain(m, &env, framework.StartControllers)`.
func StartControllers(e *Env) (func(), error) {
	return StartControllersWith(e, nil, noop.NewTracerProvider())
}

// StartControllersWith is StartControllers with the options changed by mutate (when not nil)
// and the controllers' spans sent to tp.
func StartControllersWith(e *Env, mutate func(*manager.Options), tp trace.TracerProvider) (func(), error) {
	o := manager.NewOptions()
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	o.LeaderElect = false
	o.Extensions = true
	o.AllowDuplicateControllers = true
	if mutate != nil {
		mutate(o)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.SandboxCredentials && o.CredentialsSecret == "" {
		// The key Secret lives in the controller's namespace, which a test API server lacks.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: manager.DefaultNamespace}}
		if err := e.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating the controller's namespace %s: %w", ns.Name, err)
		}
	}
	mgr, err := manager.NewManager(e.Config, e.Scheme, o)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := manager.SetupControllers(ctx, mgr, o, tp); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Printf("manager stopped with error: %v\n", err)
		}
	}, nil
}
