package sandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// opLog records, per namespace, each reconcile pass (which starts with the one read of the
// Sandbox) and the writes made during it. Passes of one Sandbox never overlap, so with one
// Sandbox per namespace a pass's writes are exactly what that pass did.
type opLog struct {
	mu     sync.Mutex
	passes map[string][][]string
}

func newOpLog() *opLog { return &opLog{passes: map[string][][]string{}} }

func (l *opLog) startPass(ns string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.passes[ns] = append(l.passes[ns], []string{})
}

func (l *opLog) record(ns, op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.passes[ns]
	if len(p) == 0 {
		p = append(p, []string{})
	}
	p[len(p)-1] = append(p[len(p)-1], op)
	l.passes[ns] = p
}

// Passes returns a copy of the passes recorded in ns.
func (l *opLog) Passes(ns string) [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([][]string, len(l.passes[ns]))
	for i, p := range l.passes[ns] {
		out[i] = append([]string(nil), p...)
	}
	return out
}

// checkOneStatusWritePerPass fails the test if any pass in ns wrote status more than once.
func checkOneStatusWritePerPass(t *testing.T, ns string) {
	t.Helper()
	for i, pass := range ops.Passes(ns) {
		n := 0
		for _, op := range pass {
			if strings.HasPrefix(op, "status") {
				n++
			}
		}
		if n > 1 {
			t.Errorf("pass %d in namespace %s wrote status %d times: %v", i, ns, n, pass)
		}
	}
}

// recordingClient is the reconciler's client with every write recorded in an opLog.
type recordingClient struct {
	client.Client
	log *opLog
}

func kindOf(obj runtime.Object) string {
	switch obj.(type) {
	case *corev1.Pod:
		return "Pod"
	case *corev1.Service:
		return "Service"
	case *corev1.PersistentVolumeClaim:
		return "PVC"
	case *agentsv1beta1.Sandbox:
		return "Sandbox"
	}
	return fmt.Sprintf("%T", obj)
}

func (c *recordingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*agentsv1beta1.Sandbox); ok {
		c.log.startPass(key.Namespace)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	c.log.record(obj.GetNamespace(), "create "+kindOf(obj)+errSuffix(err))
	return err
}

func (c *recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	c.log.record(obj.GetNamespace(), "update "+kindOf(obj)+errSuffix(err))
	return err
}

func (c *recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, patch, opts...)
	c.log.record(obj.GetNamespace(), "patch "+kindOf(obj)+errSuffix(err))
	return err
}

func (c *recordingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	c.log.record(obj.GetNamespace(), "delete "+kindOf(obj)+errSuffix(err))
	return err
}

func (c *recordingClient) Status() client.SubResourceWriter {
	return &recordingStatus{SubResourceWriter: c.Client.Status(), log: c.log}
}

type recordingStatus struct {
	client.SubResourceWriter
	log *opLog
}

func (s *recordingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	op := "status"
	if sb, ok := obj.(*agentsv1beta1.Sandbox); ok {
		if ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); ready != nil {
			op += " Ready=" + ready.Reason
		}
	}
	err := s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	s.log.record(obj.GetNamespace(), op+errSuffix(err))
	return err
}

func (s *recordingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	s.log.record(obj.GetNamespace(), "status update"+errSuffix(err))
	return err
}

func errSuffix(err error) string {
	if err != nil {
		return " (error)"
	}
	return ""
}

// countingRecorder counts events per namespace and reason and passes them on to the real
// recorder, so tests can check both how many were emitted and what reached the API.
type countingRecorder struct {
	next   events.EventRecorder
	mu     sync.Mutex
	counts map[string]int
}

func (r *countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.mu.Lock()
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	if obj, ok := regarding.(client.Object); ok {
		r.counts[obj.GetNamespace()+"/"+reason]++
	}
	r.mu.Unlock()
	r.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (r *countingRecorder) Count(ns, reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[ns+"/"+reason]
}
