package wake

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/router/headers"
)

// resumingSandboxes is a Lookup over one Sandbox whose JSON patches resume it, as the API server
// and the Sandbox controller together would (the patch's test ops are not evaluated here, so
// every resume the Waker sends is counted).
type resumingSandboxes struct {
	mu      sync.Mutex
	sb      *agentsv1beta1.Sandbox
	resumes atomic.Int64
}

func (f *resumingSandboxes) Sandbox(context.Context, string, string) (*agentsv1beta1.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sb.DeepCopy(), nil
}

func (f *resumingSandboxes) JSONPatch(context.Context, string, string, []byte) error {
	f.resumes.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning
	delete(f.sb.Annotations, agentsv1beta1.SuspendReasonAnnotation)
	f.sb.Status.PodIPs = []string{"198.18.0.7"}
	f.sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue, Reason: "DependenciesReady"}}
	return nil
}

func (f *resumingSandboxes) MergePatch(context.Context, string, string, []byte) error { return nil }

func suspended(reason string) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb", UID: "uid"}}
	sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
	if reason != "" {
		sb.Annotations = map[string]string{agentsv1beta1.SuspendReasonAnnotation: reason}
	}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}
	return sb
}

func newTestWaker(f *resumingSandboxes, timeout time.Duration) *Waker {
	w := NewWaker(f, f, headers.Policy{}, timeout, nil)
	w.dial = func(context.Context, string) error { return nil }
	return w
}

var target = headers.Target{Namespace: "ns", Name: "sb", Port: 8080}

func TestConcurrentWakesShareOneResume(t *testing.T) {
	f := &resumingSandboxes{sb: suspended(agentsv1beta1.SuspendReasonIdle)}
	w := newTestWaker(f, time.Minute)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 10 {
		wg.Go(func() {
			<-start
			ep, err := w.Wake(context.Background(), target)
			if err != nil || ep.Host != "198.18.0.7" || ep.UID != "uid" {
				t.Errorf("Wake = %+v, %v; want the resumed sandbox's endpoint", ep, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := f.resumes.Load(); n != 1 {
		t.Errorf("%d resume patches for ten concurrent wakes, want 1", n)
	}
}

func TestOnlyIdleSuspensionsWake(t *testing.T) {
	for _, reason := range []string{"", agentsv1beta1.SuspendReasonIdleNoWake} {
		f := &resumingSandboxes{sb: suspended(reason)}
		if _, err := newTestWaker(f, time.Minute).Wake(context.Background(), target); !errors.Is(err, ErrNotWakeable) {
			t.Errorf("reason %q: Wake = %v, want ErrNotWakeable", reason, err)
		}
		if n := f.resumes.Load(); n != 0 {
			t.Errorf("reason %q: %d resume patches, want none", reason, n)
		}
	}
}

func TestWakeTimesOut(t *testing.T) {
	f := &resumingSandboxes{sb: suspended(agentsv1beta1.SuspendReasonIdle)}
	w := newTestWaker(f, 50*time.Millisecond)
	w.dial = func(context.Context, string) error { return errors.New("connection refused") } // never listens
	if _, err := w.Wake(context.Background(), target); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Wake of a sandbox whose port never opens = %v, want ErrTimeout", err)
	}
}

func TestAnnotationPathEscapes(t *testing.T) {
	if got, want := annotationPath("paddock.dev/suspend-reason"), "/metadata/annotations/paddock.dev~1suspend-reason"; got != want {
		t.Errorf("annotationPath = %q, want %q", got, want)
	}
}

func TestResuming(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	sandbox := func(mode agentsv1beta1.SandboxOperatingMode, wokenAt string) *agentsv1beta1.Sandbox {
		sb := &agentsv1beta1.Sandbox{Spec: agentsv1beta1.SandboxSpec{OperatingMode: mode}}
		if wokenAt != "" {
			sb.Annotations = map[string]string{agentsv1beta1.WokenAtAnnotation: wokenAt}
		}
		return sb
	}
	running, suspended := agentsv1beta1.SandboxOperatingModeRunning, agentsv1beta1.SandboxOperatingModeSuspended
	for _, tc := range []struct {
		name string
		sb   *agentsv1beta1.Sandbox
		want bool
	}{
		{"woken 10s ago", sandbox(running, "2026-12-02T02:59:50Z"), true},
		{"woken before the timeout", sandbox(running, "2026-12-02T02:58:00Z"), false},
		{"never woken", sandbox(running, ""), false},
		{"suspended again since", sandbox(suspended, "2026-12-02T02:59:50Z"), false},
		{"unreadable stamp", sandbox(running, "soon"), false},
		{"no sandbox", nil, false},
	} {
		if got := Resuming(tc.sb, now, time.Minute); got != tc.want {
			t.Errorf("%s: Resuming = %v, want %v", tc.name, got, tc.want)
		}
	}
}
