// Package autosize proves on a real kube-apiserver that a SandboxWarmPool with
// paddock.dev/autosize sizes itself from the claims it sees: it grows under a stream of claims
// and shrinks after, through the scale subresource, with events and metrics; bad annotations are
// named by its Autosizing condition and refused by the admission policy. A stand-in
// (framework.SandboxReadiness) plays the Sandbox controller and the kubelet.
package autosize

import (
	"testing"
	"time"

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
	r, stop, err := framework.StartPoolControllers(e, poolOptions())
	readiness = r
	return stop, err
}

// poolOptions shortens the autosize windows from minutes to seconds, so that a pool shrinks
// within a test; what the windows do is the planner's table tests' business.
func poolOptions() sandboxwarmpool.Options {
	o := sandboxwarmpool.DefaultOptions()
	o.AutosizeRateWindow = 5 * time.Second
	o.AutosizeStabilizationWindow = 5 * time.Second
	return o
}
