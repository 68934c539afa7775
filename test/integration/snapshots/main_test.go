// Package snapshots proves the SandboxSnapshot controller against a real kube-apiserver, with
// every Paddock controller running as main runs them. The test plays the node: it marks Sandbox
// Pods running with a containerd container ID, and finishes capture Pods with the result a real
// capture writes to its termination message (there is no kubelet here; the capture itself is
// proven end to end on the local cluster).
package snapshots

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

// testRepository is where the tests' controller pushes snapshots: a real registry on loopback
// (startRegistry), so that deleting a snapshot deletes a real manifest.
var testRepository string

// What the tests' capture Pods run.
const (
	testCaptureImage = "registry.test:5000/paddock-snapshot:test"
	// captureNamespace is the controller's own namespace outside a Pod: capture Pods go there.
	captureNamespace = manager.DefaultNamespace
	nodeName         = "node-a"
	// testRunsc is the nodes' runsc the tests' controller is told of (memory checkpoints).
	testRunsc = "/opt/gvisor/runsc"
)

// stopControllers stops the running controllers; restartControllers replaces it.
var stopControllers func()

func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		stopRegistry := startRegistry()
		if err := startControllers(e); err != nil {
			stopRegistry()
			return nil, err
		}
		return func() { stopControllers(); stopRegistry() }, nil
	})
}

// refusingDeletes holds the namespaces whose snapshot images the registry refuses to delete
// (405 UNSUPPORTED, as a registry with deletes disabled answers).
var refusingDeletes sync.Map

// startRegistry serves an OCI registry on loopback and sets testRepository to a path in it.
func startRegistry() func() {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			if parts := strings.Split(r.URL.Path, "/"); len(parts) > 3 {
				if _, refuse := refusingDeletes.Load(parts[3]); refuse {
					w.WriteHeader(http.StatusMethodNotAllowed)
					_, _ = io.WriteString(w, `{"errors":[{"code":"UNSUPPORTED","message":"The operation is unsupported."}]}`)
					return
				}
			}
		}
		reg.ServeHTTP(w, r)
	}))
	testRepository = strings.TrimPrefix(srv.URL, "http://") + "/snapshots"
	return srv.Close
}

func startControllers(e *framework.Env) error { return startControllersWith(e, nil) }

// startControllersWith starts the controllers configured for this package's snapshots, then
// changed by mutate (when not nil).
func startControllersWith(e *framework.Env, mutate func(*manager.Options)) error {
	stop, err := framework.StartControllersWith(e, func(o *manager.Options) {
		o.SnapshotRepository = testRepository
		o.SnapshotCaptureImage = testCaptureImage
		o.SnapshotRunsc = testRunsc
		if mutate != nil {
			mutate(o)
		}
	}, noop.NewTracerProvider())
	if err != nil {
		return err
	}
	stopControllers = stop
	return nil
}

// restartControllers stops the controllers, runs between (the world changing while no
// controller runs), and starts new ones, with empty caches, as after a crash. Tests of this
// package run one at a time, so no other test is affected.
func restartControllers(t *testing.T, between func()) {
	t.Helper()
	restartControllersWith(t, between, nil)
}

// restartControllersWith is restartControllers with the new controllers' options changed by
// mutate.
func restartControllersWith(t *testing.T, between func(), mutate func(*manager.Options)) {
	t.Helper()
	stopControllers()
	between()
	if err := startControllersWith(env, mutate); err != nil {
		t.Fatalf("restarting the controllers: %v", err)
	}
}
