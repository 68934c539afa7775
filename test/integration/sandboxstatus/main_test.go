// Package sandboxstatus proves, against a real kube-apiserver, how the Sandbox controller holds
// back status changes that only report start-up progress (--sandbox-status-coalesce-window). The
// window here is an hour, so a change that is not held is one the controller chose to write.
package sandboxstatus

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	sandboxctrl "github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/test/framework"
)

var (
	env          *framework.Env
	statusWrites = &writeCounter{n: map[client.ObjectKey]int{}}
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		return e.StartManager(func(mgr ctrl.Manager) error {
			r, err := sandboxctrl.New(&countingClient{Client: mgr.GetClient()}, mgr.GetEventRecorder(sandboxctrl.ControllerName),
				sandboxctrl.Options{StatusCoalesceWindow: time.Hour, APIReader: mgr.GetAPIReader()})
			if err != nil {
				return fmt.Errorf("building sandbox reconciler: %w", err)
			}
			return r.SetupWithManager(mgr)
		}, func(o *manager.Options) { o.Cache = sandboxctrl.CacheOptions() })
	})
}

// writeCounter counts the reconciler's Sandbox status writes per Sandbox.
type writeCounter struct {
	mu sync.Mutex
	n  map[client.ObjectKey]int
}

func (w *writeCounter) get(key client.ObjectKey) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[key]
}

type countingClient struct{ client.Client }

func (c *countingClient) Status() client.SubResourceWriter {
	return &countingStatus{SubResourceWriter: c.Client.Status()}
}

type countingStatus struct{ client.SubResourceWriter }

func (s *countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	if _, ok := obj.(*agentsv1beta1.Sandbox); ok && err == nil {
		statusWrites.mu.Lock()
		statusWrites.n[client.ObjectKeyFromObject(obj)]++
		statusWrites.mu.Unlock()
	}
	return err
}
