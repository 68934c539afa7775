package framework

import (
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/paddock-dev/paddock/internal/controller/sandboxclaim"
	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
)

// StartPoolControllers runs the readiness stand-in (the Sandbox controller and the kubelet) and
// the claim, pool and template controllers, the pool controller with pools, for tiers that race
// pools against claims. stop stops all of them.
func StartPoolControllers(e *Env, pools sandboxwarmpool.Options) (readiness *SandboxReadiness, stop func(), err error) {
	r, err := StartSandboxReadiness(e)
	if err != nil {
		return nil, nil, fmt.Errorf("starting the Sandbox readiness stand-in: %w", err)
	}
	stopMgr, err := e.StartManager(func(mgr ctrl.Manager) error {
		claims, errClaims := sandboxclaim.New(mgr.GetClient(), mgr.GetEventRecorder("sandboxclaim-controller"),
			sandboxclaim.Options{APIReader: mgr.GetAPIReader()})
		pools, errPools := sandboxwarmpool.New(mgr.GetClient(), mgr.GetEventRecorder("sandboxwarmpool-controller"), pools)
		templates, errTemplates := sandboxtemplate.New(mgr.GetClient(), mgr.GetEventRecorder("sandboxtemplate-controller"), sandboxtemplate.Options{})
		if err := errors.Join(errClaims, errPools, errTemplates); err != nil {
			return err
		}
		return errors.Join(claims.SetupWithManager(mgr), pools.SetupWithManager(mgr), templates.SetupWithManager(mgr))
	})
	if err != nil {
		r.Stop()
		return nil, nil, err
	}
	return r, func() { stopMgr(); r.Stop() }, nil
}
