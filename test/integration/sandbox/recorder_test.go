package sandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// opLog records, per Sandbox ("namespace/name"), each reconcile pass (which starts with the one
// read of the Sandbox) and the writes made during it. Passes of one Sandbox never overlap, so a
// pass's writes are exactly what that pass did. A write is attributed to the Sandbox that
// controls the object written, or else to the Sandbox of the same name.
type opLog struct {
	mu     sync.Mutex
	passes map[string][][]string
	// reads holds, per pass, the resourceVersion the pass read the Sandbox at.
	reads map[string][]string
	// statuses holds every Sandbox status written successfully, in order.
	statuses map[string][]agentsv1beta1.SandboxStatus
}

func newOpLog() *opLog {
	return &opLog{passes: map[string][][]string{}, reads: map[string][]string{}, statuses: map[string][]agentsv1beta1.SandboxStatus{}}
}

func (l *opLog) recordStatus(sb *agentsv1beta1.Sandbox) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := sb.Namespace + "/" + sb.Name
	l.statuses[k] = append(l.statuses[k], *sb.Status.DeepCopy())
}

// WrittenStatuses returns the statuses the reconciler wrote for sb, oldest first: states a
// Sandbox passes through are checked here rather than by catching them with a poll.
func (l *opLog) WrittenStatuses(sb client.Object) []agentsv1beta1.SandboxStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]agentsv1beta1.SandboxStatus(nil), l.statuses[sb.GetNamespace()+"/"+sb.GetName()]...)
}

func (l *opLog) startPass(key, readVersion string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.passes[key] = append(l.passes[key], []string{})
	l.reads[key] = append(l.reads[key], readVersion)
}

// ReadVersions returns the resourceVersion each pass of sb read.
func (l *opLog) ReadVersions(sb client.Object) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reads[sb.GetNamespace()+"/"+sb.GetName()]...)
}

func (l *opLog) record(obj client.Object, op string) {
	key := obj.GetNamespace() + "/" + obj.GetName()
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "Sandbox" {
		key = obj.GetNamespace() + "/" + ref.Name
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.passes[key]
	if len(p) == 0 {
		p = append(p, []string{})
		l.reads[key] = append(l.reads[key], "")
	}
	p[len(p)-1] = append(p[len(p)-1], op)
	l.passes[key] = p
}

// Passes returns a copy of the passes recorded for sb.
func (l *opLog) Passes(sb client.Object) [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := sb.GetNamespace() + "/" + sb.GetName()
	out := make([][]string, len(l.passes[k]))
	for i, p := range l.passes[k] {
		out[i] = append([]string(nil), p...)
	}
	return out
}

// checkOneStatusWritePerPass fails the test if any pass of any Sandbox in ns wrote status more
// than once.
func checkOneStatusWritePerPass(t testing.TB, ns string) {
	t.Helper()
	ops.mu.Lock()
	defer ops.mu.Unlock()
	for key, passes := range ops.passes {
		if !strings.HasPrefix(key, ns+"/") {
			continue
		}
		for i, pass := range passes {
			n := 0
			for _, op := range pass {
				if strings.HasPrefix(op, "status") {
					n++
				}
			}
			if n > 1 {
				t.Errorf("pass %d of sandbox %s wrote status %d times: %v", i, key, n, pass)
			}
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
	err := c.Client.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*agentsv1beta1.Sandbox); ok {
		c.log.startPass(key.String(), obj.GetResourceVersion())
	}
	return err
}

func (c *recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	c.log.record(obj, "create "+kindOf(obj)+errSuffix(err))
	return err
}

func (c *recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	c.log.record(obj, "update "+kindOf(obj)+errSuffix(err))
	return err
}

func (c *recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, patch, opts...)
	c.log.record(obj, "patch "+kindOf(obj)+errSuffix(err))
	return err
}

func (c *recordingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	c.log.record(obj, "delete "+kindOf(obj)+errSuffix(err))
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
	s.log.record(obj, op+errSuffix(err))
	if sb, ok := obj.(*agentsv1beta1.Sandbox); ok && err == nil {
		s.log.recordStatus(sb)
	}
	return err
}

func (s *recordingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	s.log.record(obj, "status update"+errSuffix(err))
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
