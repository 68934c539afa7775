// Package idle proves scale to zero against a real kube-apiserver: the real Sandbox controller
// runs in a manager (tests play kubelet), and each test drives the idle reconciler itself with
// an injected clock and daemon, so every decision is observed synchronously.
package idle

import (
	"context"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	sandboxctrl "github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		return e.StartManager(func(mgr ctrl.Manager) error {
			opts := sandboxctrl.DefaultOptions()
			opts.Workers, opts.APIReader = 4, mgr.GetAPIReader()
			r, err := sandboxctrl.New(mgr.GetClient(), mgr.GetEventRecorder(sandboxctrl.ControllerName), opts)
			if err != nil {
				return err
			}
			return r.SetupWithManager(mgr)
		}, func(o *manager.Options) { o.Cache = sandboxctrl.CacheOptions() })
	})
}

// fakeDaemon is the sandboxd every Sandbox of a test answers with; nil answers "no daemon".
type fakeDaemon struct {
	mu sync.Mutex
	a  *sandboxd.Activity
}

func (f *fakeDaemon) set(a *sandboxd.Activity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.a = a
}

func (f *fakeDaemon) Activity(context.Context, *agentsv1beta1.Sandbox) (*sandboxd.Activity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.a == nil {
		return nil, nil
	}
	a := *f.a
	return &a, nil
}

// newClock starts a test's clock at the wall clock, so Ready's transition time (written by the
// Sandbox controller's real clock) is in its past once the Sandbox is Ready.
func newClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Now().Add(time.Minute))
}
