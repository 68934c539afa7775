// Package e2bfrontdoor proves the E2B front door against a real API server with every controller running
// as main wires them; the test plays the kubelet, and a loopback stand-in plays the sandboxes'
// daemon (sandboxd's envd protocol is tested in sandboxd's own packages). The snapshot
// controller is configured, and the snapshot tests play its capture Pods (snapshots_test.go).
package e2bfrontdoor

import (
	"testing"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace/noop"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

// Where the controller pushes snapshots and what its capture Pods run; no registry is reached.
const (
	testRepository   = "registry.test:5000/snapshots"
	testCaptureImage = "registry.test:5000/paddock-snapshot:test"
	// testSandboxdImage is --sandboxd-image, for templates that bring their own image.
	testSandboxdImage = "registry.test:5000/paddock/sandbox:test"
)

func TestMain(m *testing.M) {
	crlog.SetLogger(logr.Discard())
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		return framework.StartControllersWith(e, func(o *manager.Options) {
			o.SnapshotRepository = testRepository
			o.SnapshotCaptureImage = testCaptureImage
			o.SandboxdImage = testSandboxdImage
		}, noop.NewTracerProvider())
	})
}
