// Package extensions proves the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers
// against a real kube-apiserver. The controllers run in one manager per test binary; a stand-in
// (framework.SandboxReadiness) plays the Sandbox controller and the kubelet.
package extensions

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/paddock-dev/paddock/internal/controller/sandboxclaim"
	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env, startHarness)
}

// Router and controller selections the tests give the template controller, to prove they are
// options.
var (
	testRouterNamespace     = "paddock-test-router"
	testRouterLabels        = map[string]string{"app.kubernetes.io/name": "test-router"}
	testControllerNamespace = "paddock-test-controller"
	testControllerLabels    = map[string]string{"app.kubernetes.io/name": "test-controller"}
)

// harness runs the controllers under test and counts the writes each one sends.
type harness struct {
	mu        sync.Mutex
	stopMgr   func()
	poolOpts  sandboxwarmpool.Options
	writes    map[string]*writeLog // by controller: "claim", "pool", "template"
	readiness *framework.SandboxReadiness
}

var (
	h *harness
	// metrics is the registry the claim metrics are registered with, as main does with
	// controller-runtime's.
	metrics = prometheus.NewRegistry()
)

// startHarness starts the readiness stand-in and the controllers for the whole package.
func startHarness(e *framework.Env) (func(), error) {
	if err := sandboxclaim.RegisterMetrics(metrics); err != nil {
		return nil, fmt.Errorf("registering claim metrics: %w", err)
	}
	r, err := framework.StartSandboxReadiness(e)
	if err != nil {
		return nil, fmt.Errorf("starting the Sandbox readiness stand-in: %w", err)
	}
	h = &harness{readiness: r, poolOpts: sandboxwarmpool.DefaultOptions()}
	if err := h.start(); err != nil {
		r.Stop()
		return nil, err
	}
	return func() { h.stop(); r.Stop() }, nil
}

// controllers returns the running harness with every Sandbox made Ready.
func controllers(t *testing.T) *harness {
	t.Helper()
	h.readiness.SetDecision(nil)
	return h
}

// start runs a fresh manager with fresh in-memory state, as a restarted process would.
func (h *harness) start() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes = map[string]*writeLog{"claim": newWriteLog(), "pool": newWriteLog(), "template": newWriteLog()}
	stop, err := env.StartManager(func(mgr ctrl.Manager) error {
		counted := func(name string) client.Client { return &countingClient{Client: mgr.GetClient(), log: h.writes[name]} }
		claims, errClaims := sandboxclaim.New(counted("claim"), mgr.GetEventRecorder("sandboxclaim-controller"),
			sandboxclaim.Options{APIReader: mgr.GetAPIReader()})
		pools, errPools := sandboxwarmpool.New(counted("pool"), mgr.GetEventRecorder("sandboxwarmpool-controller"), h.poolOpts)
		templates, errTemplates := sandboxtemplate.New(counted("template"), mgr.GetEventRecorder("sandboxtemplate-controller"),
			sandboxtemplate.Options{RouterNamespace: testRouterNamespace, RouterPodLabels: testRouterLabels,
				ControllerNamespace: testControllerNamespace, ControllerPodLabels: testControllerLabels})
		if err := errors.Join(errClaims, errPools, errTemplates); err != nil {
			return err
		}
		return errors.Join(claims.SetupWithManager(mgr), pools.SetupWithManager(mgr), templates.SetupWithManager(mgr))
	}, func(o *manager.Options) {
		// A restarted harness registers the same controller names again in this process.
		o.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	})
	if err != nil {
		return err
	}
	h.stopMgr = stop
	return nil
}

// stop stops the manager and waits until its workers are gone.
func (h *harness) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopMgr()
}

// restart stops the manager and starts a new one with pool options opts.
func (h *harness) restart(t *testing.T, opts sandboxwarmpool.Options) {
	t.Helper()
	h.stop()
	h.poolOpts = opts
	if err := h.start(); err != nil {
		t.Fatalf("restarting controllers: %v", err)
	}
}

// writesOf returns the write log of one controller.
func (h *harness) writesOf(name string) *writeLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes[name]
}
