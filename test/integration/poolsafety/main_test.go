// Package poolsafety proves on a real kube-apiserver that no warm-pool operation deletes a
// Sandbox a claim took: scale-downs, Recreate rollouts and not-Ready replacements all race a
// burst of claims adopting members. A stand-in (framework.SandboxReadiness) plays the Sandbox
// controller and the kubelet.
package poolsafety

import (
	"errors"
	"fmt"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/paddock-dev/paddock/internal/controller/sandboxclaim"
	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
	"github.com/paddock-dev/paddock/test/framework"
)

var (
	env       *framework.Env
	readiness *framework.SandboxReadiness
)

func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env, startControllers)
}

// startControllers runs the readiness stand-in and the claim, pool and template controllers.
func startControllers(e *framework.Env) (func(), error) {
	r, err := framework.StartSandboxReadiness(e)
	if err != nil {
		return nil, fmt.Errorf("starting the Sandbox readiness stand-in: %w", err)
	}
	readiness = r
	stop, err := e.StartManager(func(mgr ctrl.Manager) error {
		claims, errClaims := sandboxclaim.New(mgr.GetClient(), mgr.GetEventRecorder("sandboxclaim-controller"),
			sandboxclaim.Options{APIReader: mgr.GetAPIReader()})
		pools, errPools := sandboxwarmpool.New(mgr.GetClient(), mgr.GetEventRecorder("sandboxwarmpool-controller"), poolOptions())
		templates, errTemplates := sandboxtemplate.New(mgr.GetClient(), mgr.GetEventRecorder("sandboxtemplate-controller"), sandboxtemplate.Options{})
		if err := errors.Join(errClaims, errPools, errTemplates); err != nil {
			return err
		}
		return errors.Join(claims.SetupWithManager(mgr), pools.SetupWithManager(mgr), templates.SetupWithManager(mgr))
	})
	if err != nil {
		r.Stop()
		return nil, err
	}
	return func() { stop(); r.Stop() }, nil
}

// readinessGrace is the pools' readiness grace period: short, so that members that never become
// Ready are replaced within a test, and long enough that a loaded machine's members are not.
const readinessGrace = 15 * time.Second

func poolOptions() sandboxwarmpool.Options {
	o := sandboxwarmpool.DefaultOptions()
	o.ReadinessGracePeriod = readinessGrace
	o.UnschedulableRecheckInterval = 2 * time.Second
	return o
}
