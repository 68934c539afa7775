package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/wake"
)

// resumingSandbox is the router's view of one Sandbox the idle controller suspended: a resume
// patch makes it Running but not Ready, and it turns Ready only when the test says so, as a
// resumed Pod passing its readiness probe would.
type resumingSandbox struct {
	mu          sync.Mutex
	sb          *agentsv1beta1.Sandbox
	resumed     chan struct{}
	resumes     int
	resumedOnce sync.Once
}

func newResumingSandbox(port string) *resumingSandbox {
	sb := sandbox("127.0.0.1", port)
	sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
	sb.Annotations = map[string]string{agentsv1beta1.SuspendReasonAnnotation: agentsv1beta1.SuspendReasonIdle}
	sb.Status.PodIPs = nil
	meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{Type: agentsv1beta1.SandboxConditionReady,
		Status: metav1.ConditionFalse, Reason: "Suspended"})
	return &resumingSandbox{sb: sb, resumed: make(chan struct{})}
}

func (f *resumingSandbox) Sandbox(_ context.Context, ns, name string) (*agentsv1beta1.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.sb.DeepCopy()
	sb.Namespace, sb.Name = ns, name
	return sb, nil
}

func (f *resumingSandbox) JSONPatch(context.Context, string, string, []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumes++
	f.sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning
	delete(f.sb.Annotations, agentsv1beta1.SuspendReasonAnnotation)
	f.resumedOnce.Do(func() { close(f.resumed) })
	return nil
}

func (f *resumingSandbox) MergePatch(context.Context, string, string, []byte) error { return nil }

func (f *resumingSandbox) resumeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resumes
}

// ready reports the resumed Pod Ready at 127.0.0.1.
func (f *resumingSandbox) ready() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sb.Status.PodIPs = []string{"127.0.0.1"}
	meta.SetStatusCondition(&f.sb.Status.Conditions, metav1.Condition{Type: agentsv1beta1.SandboxConditionReady,
		Status: metav1.ConditionTrue, Reason: agentsv1beta1.SandboxReasonDependenciesReady})
}

// resolverView is the resolver's window on the same Sandbox; it tells the test each time a
// request looked the Sandbox up, which the Waker's own polling (through resumingSandbox) does not.
type resolverView struct {
	*resumingSandbox
	lookups chan struct{}
}

func (v resolverView) Sandbox(ctx context.Context, ns, name string) (*agentsv1beta1.Sandbox, error) {
	sb, err := v.resumingSandbox.Sandbox(ctx, ns, name)
	select {
	case v.lookups <- struct{}{}:
	default: // lookups after the two the test waits for
	}
	return sb, err
}

// A request that arrives after the first one resumed the Sandbox, while the router's cache shows
// it Running but not yet Ready, joins that wake: it is held and answered, not refused with 503.
func TestWakeHoldsRequestsArrivingWhileResuming(t *testing.T) {
	port := upstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("awake")) })
	sb := newResumingSandbox(port)
	view := resolverView{sb, make(chan struct{}, 4)}
	waker := wake.NewWaker(sb, sb, loopback, time.Minute, nil)
	f := newFixture(t, func(c *Config) {
		c.Resolver.Lookup = view
		c.Waker = waker
	})
	h := map[string]string{"X-Sandbox-ID": "sleepy", "X-Sandbox-Namespace": "ns", "X-Sandbox-Port": port}

	type answer struct {
		status int
		body   string
	}
	answers := make(chan answer, 2)
	send := func() {
		resp, body := f.do(t, http.MethodGet, "/", nil, h)
		answers <- answer{resp.StatusCode, body}
	}
	go send()
	<-view.lookups // the first request found it suspended...
	<-sb.resumed   // ...and resumed it: Running, not Ready
	if !waker.Waking(headers.Target{Namespace: "ns", Name: "sleepy"}) {
		t.Fatal("Waking is false while the resume waits for Ready")
	}
	go send()
	<-view.lookups // the second request found it Running but not Ready
	sb.ready()
	for range 2 {
		if a := <-answers; a.status != http.StatusOK || a.body != "awake" {
			t.Errorf("answer %d %s, want 200 \"awake\"", a.status, strings.TrimSpace(a.body))
		}
	}
	if n := sb.resumeCount(); n != 1 {
		t.Errorf("%d resume patches, want 1", n)
	}
}
