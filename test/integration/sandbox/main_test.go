// Package sandbox proves the Sandbox controller against a real kube-apiserver: the reconciler
// runs in a controller-runtime manager with the project's indexes, and tests play scheduler and
// kubelet by writing Pod status themselves.
package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	sandboxctrl "github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/test/framework"
)

var (
	env *framework.Env
	// clock is the reconciler's clock: expiry tests step it instead of waiting.
	clock = clocktesting.NewFakeClock(time.Now())
	// ops records every pass and every write of the reconciler, per namespace.
	ops = newOpLog()
	// recorder counts the events the reconciler emits.
	recorder = &countingRecorder{}
	// spans holds the reconciler's finished spans.
	spans = tracetest.NewInMemoryExporter()
)

// TestMain starts the API server, then a manager running the real Sandbox reconciler.
func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		return e.StartManager(func(mgr ctrl.Manager) error {
			recorder.next = mgr.GetEventRecorder(sandboxctrl.ControllerName)
			opts := sandboxctrl.DefaultOptions()
			opts.Clock, opts.ClusterDomain, opts.Workers = clock, "paddock.test", 4
			opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
			opts.APIReader = mgr.GetAPIReader()
			// Credentials are on, as in production; PADDOCK_SANDBOX_CREDENTIALS=off measures the
			// benchmarks without them (--sandbox-credentials=false).
			if os.Getenv("PADDOCK_SANDBOX_CREDENTIALS") != "off" {
				opts.CredentialsKey = bytes.Repeat([]byte{1}, credentials.KeySize)
			}
			r, err := sandboxctrl.New(&recordingClient{Client: mgr.GetClient(), log: ops}, recorder, opts)
			if err != nil {
				return fmt.Errorf("building sandbox reconciler: %w", err)
			}
			return r.SetupWithManager(mgr)
		}, func(o *manager.Options) { o.Cache = sandboxctrl.CacheOptions() })
	})
}
