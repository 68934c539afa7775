// Package autosize proves on a real kube-apiserver that a SandboxWarmPool with
// paddock.dev/autosize sizes itself from the claims it sees: it grows under a stream of claims
// and shrinks after, through the scale subresource, with events and metrics; bad annotations are
// named by its Autosizing condition and refused by the admission policy. A stand-in
// (framework.SandboxReadiness) plays the Sandbox controller and the kubelet.
package autosize

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

// poolOptions shortens the autosize windows from minutes to seconds, so that a pool shrinks
// within a test; what the windows do is the planner's table tests' business.
func poolOptions() sandboxwarmpool.Options {
	o := sandboxwarmpool.DefaultOptions()
	o.AutosizeRateWindow = 5 * time.Second
	o.AutosizeStabilizationWindow = 5 * time.Second
	return o
}
