// Package wake is the router's half of scale to zero: Waker resumes a Sandbox the idle
// controller suspended when a request for it arrives, once however many requests arrive, and
// holds them until the Sandbox is Ready and its port accepts connections; Reporter tells the
// idle controller about the requests it forwards, at most once a minute per Sandbox.
package wake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/activity"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/resolve"
)

// DefaultTimeout is --wake-timeout's default.
const DefaultTimeout = 60 * time.Second

// pollInterval is how often a held request looks at the cache and the port; both are local.
const pollInterval = 20 * time.Millisecond

// Patcher writes patches to Sandboxes: JSON patches (RFC 6902) for waking, merge patches for
// activity. The router's implementation is a dynamic client; tests may use any.
type Patcher interface {
	JSONPatch(ctx context.Context, namespace, name string, patch []byte) error
	MergePatch(ctx context.Context, namespace, name string, patch []byte) error
}

// ErrNotWakeable means the Sandbox is suspended, but not by the idle controller with wake allowed
// (a manual suspension, or wake-on-request false). Traffic never resumes it.
var ErrNotWakeable = errors.New("not wakeable")

// ErrTimeout means the Sandbox did not become Ready and reachable within the wake timeout.
var ErrTimeout = errors.New("wake timed out")

// Observer learns about wakes, for metrics; optional.
type Observer interface {
	// Resumed counts one resume patch this router sent.
	Resumed()
	// Woken records how long a held request waited until the Sandbox could serve it.
	Woken(d time.Duration, ok bool)
}

// Waker wakes Sandboxes suspended for being idle. Build it with NewWaker.
type Waker struct {
	lookup   resolve.Lookup
	patcher  Patcher
	policy   headers.Policy
	timeout  time.Duration
	observer Observer
	group    singleflight.Group
	dial     func(ctx context.Context, hostport string) error

	// waking holds the "namespace/name" of each resume in flight, from the first request until
	// the Sandbox is Ready. The cache shows such a Sandbox Running but not Ready for a while;
	// requests arriving then join the resume instead of getting 503.
	waking sync.Map
}

// NewWaker returns a Waker that reads Sandboxes from lookup (the router's cache), resumes them
// through patcher, and holds requests at most timeout.
func NewWaker(lookup resolve.Lookup, patcher Patcher, policy headers.Policy, timeout time.Duration, observer Observer) *Waker {
	return &Waker{lookup: lookup, patcher: patcher, policy: policy, timeout: timeout, observer: observer, dial: dialOnce}
}

// Timeout is the longest a request is held.
func (w *Waker) Timeout() time.Duration { return w.timeout }

// Wakeable reports whether traffic may wake sb: the idle controller suspended it and its policy
// allows waking on request.
func Wakeable(sb *agentsv1beta1.Sandbox) bool {
	return sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended &&
		sb.Annotations[agentsv1beta1.SuspendReasonAnnotation] == agentsv1beta1.SuspendReasonIdle
}

// Waking reports whether this router is resuming the Sandbox t names: it was woken and is not yet
// Ready. A request that finds it not Ready should then be held with Wake like the first one.
func (w *Waker) Waking(t headers.Target) bool {
	_, ok := w.waking.Load(flightKey(t))
	return ok
}

func flightKey(t headers.Target) string { return t.Namespace + "/" + t.Name }

// Wake resumes the Sandbox t names if it is Wakeable and returns once it resolves to an endpoint
// whose port accepts a connection, or ErrNotWakeable, or ErrTimeout after the wake timeout.
// Concurrent calls for one Sandbox share one resume. It is also the seam for other front doors
// (the E2B connect and autoResume paths): call it before forwarding to a suspended sandbox.
func (w *Waker) Wake(ctx context.Context, t headers.Target) (resolve.Endpoint, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	// The shared resume outlives any one caller: a client that gives up must not fail the rest.
	key := flightKey(t)
	ch := w.group.DoChan(key, func() (any, error) {
		w.waking.Store(key, struct{}{})
		defer w.waking.Delete(key)
		flight, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.timeout)
		defer cancel()
		return nil, w.resume(flight, t)
	})
	var err error
	select {
	case res := <-ch:
		err = res.Err
	case <-ctx.Done():
		err = ErrTimeout
	}
	var ep resolve.Endpoint
	if err == nil {
		ep, err = w.reachable(ctx, t)
	}
	if w.observer != nil && !errors.Is(err, ErrNotWakeable) {
		w.observer.Woken(time.Since(start), err == nil)
	}
	return ep, err
}

// resume sends the resume patch when the Sandbox is still suspended, then waits until the cache
// shows it Ready.
func (w *Waker) resume(ctx context.Context, t headers.Target) error {
	sb, err := w.lookup.Sandbox(ctx, t.Namespace, t.Name)
	if err != nil || sb == nil {
		return fmt.Errorf("%w: Sandbox %s/%s not found", ErrNotWakeable, t.Namespace, t.Name)
	}
	if sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended {
		if !Wakeable(sb) {
			return ErrNotWakeable
		}
		if err := w.patcher.JSONPatch(ctx, t.Namespace, t.Name, resumePatch(time.Now())); err != nil {
			// A failed test op means the Sandbox changed under us (another replica woke it, or a
			// user suspended it by hand); the wait below tells which.
			if !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) && !isUnprocessable(err) {
				return fmt.Errorf("resuming Sandbox %s/%s: %w", t.Namespace, t.Name, err)
			}
		} else if w.observer != nil {
			w.observer.Resumed()
		}
	}
	for {
		sb, err := w.lookup.Sandbox(ctx, t.Namespace, t.Name)
		if err == nil && sb != nil {
			if sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended && !Wakeable(sb) {
				return ErrNotWakeable
			}
			if _, rerr := resolve.FromSandbox(sb, t, w.policy); rerr == nil || rerr.Reason == resolve.ReasonPortNotDeclared {
				return nil // Ready (a port error is the caller's to report)
			}
		}
		select {
		case <-ctx.Done():
			return ErrTimeout
		case <-time.After(pollInterval):
		}
	}
}

// reachable resolves t and waits until its port accepts a TCP connection: Ready says the Pod's
// probes passed, not that the daemon a client talks to listens yet.
func (w *Waker) reachable(ctx context.Context, t headers.Target) (resolve.Endpoint, error) {
	for {
		sb, err := w.lookup.Sandbox(ctx, t.Namespace, t.Name)
		if err == nil && sb != nil {
			ep, rerr := resolve.FromSandbox(sb, t, w.policy)
			if rerr != nil && rerr.Reason == resolve.ReasonPortNotDeclared {
				return resolve.Endpoint{}, rerr
			}
			if rerr == nil && w.dial(ctx, ep.HostPort()) == nil {
				return ep, nil
			}
		}
		select {
		case <-ctx.Done():
			return resolve.Endpoint{}, ErrTimeout
		case <-time.After(pollInterval):
		}
	}
}

func dialOnce(ctx context.Context, hostport string) error {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return err
	}
	return c.Close()
}

func isUnprocessable(err error) bool {
	var se apierrors.APIStatus
	return errors.As(err, &se) && se.Status().Code == 422
}

// resumePatch resumes a Sandbox only while it is still suspended for being idle with wake
// allowed; the test operations make the API server refuse it otherwise. It removes the reason,
// so that a later manual suspension is never mistaken for an idle one, and stamps the wake's
// time, so that the other router replicas hold requests too until the Sandbox is Ready.
func resumePatch(now time.Time) []byte {
	return mustJSON([]map[string]any{
		{"op": "test", "path": "/spec/operatingMode", "value": agentsv1beta1.SandboxOperatingModeSuspended},
		{"op": "test", "path": annotationPath(agentsv1beta1.SuspendReasonAnnotation), "value": agentsv1beta1.SuspendReasonIdle},
		{"op": "replace", "path": "/spec/operatingMode", "value": agentsv1beta1.SandboxOperatingModeRunning},
		{"op": "remove", "path": annotationPath(agentsv1beta1.SuspendReasonAnnotation)},
		{"op": "add", "path": annotationPath(agentsv1beta1.WokenAtAnnotation), "value": activity.Format(now)},
	})
}

// Resuming reports whether sb is coming back from a wake that some router (this one or another
// replica) made less than within ago: Running, stamped paddock.dev/woken-at since. A request that
// finds such a Sandbox not Ready is held like the first one.
func Resuming(sb *agentsv1beta1.Sandbox, now time.Time, within time.Duration) bool {
	if sb == nil || sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended {
		return false
	}
	at, ok := activity.Parse(sb.Annotations[agentsv1beta1.WokenAtAnnotation])
	return ok && now.Sub(at) < within
}

// ResumedElsewhere reports whether the cached Sandbox t names is Resuming within this router's
// wake timeout: a resume another replica made, which this one should wait out, not refuse.
func (w *Waker) ResumedElsewhere(ctx context.Context, t headers.Target) bool {
	sb, err := w.lookup.Sandbox(ctx, t.Namespace, t.Name)
	return err == nil && Resuming(sb, time.Now(), w.timeout)
}

// annotationPath is the JSON pointer (RFC 6901) of an annotation key.
func annotationPath(key string) string {
	b := []byte("/metadata/annotations/")
	for _, c := range []byte(key) {
		switch c {
		case '~':
			b = append(b, '~', '0')
		case '/':
			b = append(b, '~', '1')
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
