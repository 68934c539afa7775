// Package writebehind proves the Sandbox controller's write-behind option
// (--sandbox-write-behind-window) against a real kube-apiserver. The reconciler's clock is a
// fake that only the tests move, so "the window has not passed" is a fact, not a timing guess:
// whatever the machine's speed, no held-back patch may reach a Pod until a test steps the clock.
// Tests here share that clock and therefore never run in parallel.
package writebehind

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	sandboxctrl "github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/test/framework"
)

var (
	env   *framework.Env
	clock = clocktesting.NewFakeClock(time.Now())
	log   = &writeLog{reads: map[client.ObjectKey][]string{}, podPatches: map[podPatch]int{}}
)

// TestMain runs the real Sandbox reconciler with a write-behind window far longer than the cap,
// so the window in force is sandbox.MaxWriteBehindWindow of fake time.
func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		return e.StartManager(func(mgr ctrl.Manager) error {
			r, err := sandboxctrl.New(&recordingClient{Client: mgr.GetClient()}, mgr.GetEventRecorder(sandboxctrl.ControllerName),
				sandboxctrl.Options{Clock: clock, Workers: 4, APIReader: mgr.GetAPIReader(), WriteBehindWindow: time.Hour,
					StatusCoalesceWindow: 0}) // only the write-behind clock is under test
			if err != nil {
				return fmt.Errorf("building sandbox reconciler: %w", err)
			}
			return r.SetupWithManager(mgr)
		}, func(o *manager.Options) { o.Cache = sandboxctrl.CacheOptions() })
	})
}

// writeLog records the resourceVersion each pass read a Sandbox at, and the metadata patches
// sent to each Pod.
type writeLog struct {
	mu         sync.Mutex
	reads      map[client.ObjectKey][]string
	podPatches map[podPatch]int
}

type podPatch struct {
	key  client.ObjectKey
	kind string // "metadata" or "adoption"
}

func (l *writeLog) passes(k client.ObjectKey) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reads[k]...)
}

// patches returns how many patches of the given kind the Pod k received.
func (l *writeLog) patches(k client.ObjectKey, kind string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.podPatches[podPatch{key: k, kind: kind}]
}

// recordingClient is the reconciler's client, recording into log.
type recordingClient struct{ client.Client }

func (c *recordingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*agentsv1beta1.Sandbox); ok {
		log.mu.Lock()
		log.reads[key] = append(log.reads[key], obj.GetResourceVersion())
		log.mu.Unlock()
	}
	return err
}

// Patch records successful Pod patches, telling adoptions (which set the owner reference) from
// metadata patches.
func (c *recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	data, dataErr := patch.Data(obj)
	err := c.Client.Patch(ctx, obj, patch, opts...)
	if _, ok := obj.(*corev1.Pod); ok && err == nil && dataErr == nil {
		kind := "metadata"
		if bytes.Contains(data, []byte(`"ownerReferences"`)) {
			kind = "adoption"
		}
		log.mu.Lock()
		log.podPatches[podPatch{key: client.ObjectKeyFromObject(obj), kind: kind}]++
		log.mu.Unlock()
	}
	return err
}
