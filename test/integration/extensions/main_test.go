// Package extensions proves the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers
// against a real kube-apiserver. The controllers run in one manager per test binary; a stand-in
// (framework.SandboxReadiness) plays the Sandbox controller and the kubelet.
package extensions

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paddock-dev/paddock/internal/controller/extindex"
	"github.com/paddock-dev/paddock/internal/controller/sandboxclaim"
	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
	"github.com/paddock-dev/paddock/internal/warmqueue"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	// PADDOCK_TEST_LOG=1 shows the controllers' logs; otherwise they are discarded.
	if os.Getenv("PADDOCK_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	// The harness starts lazily in the tests; stop it after them, before the API server.
	framework.RunMain(m, &env, func(*framework.Env) (func(), error) {
		return func() {
			if h != nil {
				h.stop()
				h.readiness.Stop()
			}
		}, nil
	})
}

// Router selection the tests give the template controller, to prove it is an option.
var (
	testRouterNamespace = "paddock-test-router"
	testRouterLabels    = map[string]string{"app.kubernetes.io/name": "test-router"}
)

// harness runs the controllers under test and counts the writes each one sends.
type harness struct {
	mu        sync.Mutex
	cancel    context.CancelFunc
	done      chan struct{}
	poolOpts  sandboxwarmpool.Options
	writes    map[string]*writeLog // by controller: "claim", "pool", "template"
	readiness *framework.SandboxReadiness
}

var (
	h     *harness
	hOnce sync.Once
	// metrics is the registry the claim metrics are registered with, as main does with
	// controller-runtime's.
	metrics = prometheus.NewRegistry()
)

// controllers returns the running harness, starting it on first use.
func controllers(t *testing.T) *harness {
	t.Helper()
	hOnce.Do(func() {
		r, err := framework.StartSandboxReadiness(env)
		if err != nil {
			t.Fatalf("starting the Sandbox readiness stand-in: %v", err)
		}
		if err := sandboxclaim.RegisterMetrics(metrics); err != nil {
			t.Fatalf("registering claim metrics: %v", err)
		}
		h = &harness{readiness: r, poolOpts: sandboxwarmpool.DefaultOptions()}
		h.start(t)
	})
	h.readiness.SetDecision(nil)
	return h
}

// start runs a fresh manager with fresh in-memory state, as a restarted process would.
func (h *harness) start(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("creating manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := extindex.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatalf("registering indexes: %v", err)
	}
	h.writes = map[string]*writeLog{"claim": newWriteLog(), "pool": newWriteLog(), "template": newWriteLog()}
	counted := func(name string) client.Client { return &countingClient{Client: mgr.GetClient(), log: h.writes[name]} }
	claims := sandboxclaim.New(counted("claim"), mgr.GetAPIReader(), mgr.GetEventRecorder("sandboxclaim-controller"), warmqueue.New(), sandboxclaim.Options{})
	pools := sandboxwarmpool.New(counted("pool"), mgr.GetEventRecorder("sandboxwarmpool-controller"), h.poolOpts)
	templates := sandboxtemplate.New(counted("template"), mgr.GetEventRecorder("sandboxtemplate-controller"), sandboxtemplate.Options{RouterNamespace: testRouterNamespace, RouterPodLabels: testRouterLabels})
	for _, setup := range []func(ctrl.Manager) error{claims.SetupWithManager, pools.SetupWithManager, templates.SetupWithManager} {
		if err := setup(mgr); err != nil {
			t.Fatalf("setting up controllers: %v", err)
		}
	}
	h.cancel, h.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Logf("manager stopped: %v", err)
		}
	}(h.done)
}

// stop stops the manager and waits until its workers are gone.
func (h *harness) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cancel()
	<-h.done
}

// restart stops the manager and starts a new one with pool options opts.
func (h *harness) restart(t *testing.T, opts sandboxwarmpool.Options) {
	t.Helper()
	h.stop()
	h.poolOpts = opts
	h.start(t)
}

// writesOf returns the write log of one controller.
func (h *harness) writesOf(name string) *writeLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes[name]
}
