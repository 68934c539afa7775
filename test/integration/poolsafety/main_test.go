// Package poolsafety proves on a real kube-apiserver that no warm-pool operation deletes a
// Sandbox a claim took: scale-downs, Recreate rollouts and not-Ready replacements all race a
// burst of claims adopting members. A stand-in (framework.SandboxReadiness) plays the Sandbox
// controller and the kubelet.
package poolsafety

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

// readinessGrace is the pools' readiness grace period: short, so that members that never become
// Ready are replaced within a test, and long enough that a loaded machine's members are not.
const readinessGrace = 15 * time.Second

func poolOptions() sandboxwarmpool.Options {
	o := sandboxwarmpool.DefaultOptions()
	o.ReadinessGracePeriod = readinessGrace
	o.UnschedulableRecheckInterval = 2 * time.Second
	return o
}
