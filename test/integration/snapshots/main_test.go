// Package snapshots proves the SandboxSnapshot controller against a real kube-apiserver, with
// every Paddock controller running as main runs them. The test plays the node: it marks Sandbox
// Pods running with a containerd container ID, and finishes capture Pods with the result a real
// capture writes to its termination message (there is no kubelet here; the capture itself is
// proven end to end on the local cluster).
package snapshots

import (
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

// Where the tests' controller pushes snapshots and what its capture Pods run.
const (
	testRepository   = "registry.test:5000/snapshots"
	testCaptureImage = "registry.test:5000/paddock-snapshot:test"
	// captureNamespace is the controller's own namespace outside a Pod: capture Pods go there.
	captureNamespace = manager.DefaultNamespace
	nodeName         = "node-a"
)

func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		return framework.StartControllersWith(e, func(o *manager.Options) {
			o.SnapshotRepository = testRepository
			o.SnapshotCaptureImage = testCaptureImage
		}, noop.NewTracerProvider())
	})
}
