package e2b

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/podresize"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/resolve"
)

// probeRetry is how long to wait before probing a daemon that refused again when no watch event
// comes first.
const probeRetry = 20 * time.Millisecond

// claimFailures are the claim Ready reasons a wait cannot outlast: the claim controller has
// decided the claim cannot be served as it stands.
var claimFailures = map[string]bool{
	extensionsv1beta1.ClaimReasonTemplateNotFound:          true,
	extensionsv1beta1.ClaimReasonWarmPoolNotFound:          true,
	extensionsv1beta1.ClaimReasonInvalidMetadata:           true,
	extensionsv1beta1.ClaimReasonEnvVarsInjectionRejected:  true,
	extensionsv1beta1.ClaimReasonVolumeClaimTemplatesError: true,
}

// unservable is a create that waiting cannot complete: the template or the claim has to change.
type unservable string

func (u unservable) Error() string { return string(u) }

// awaitDaemon follows the claim on the front door's watch until the claim is in the cache (where
// the data plane looks it up), a Sandbox is bound to it (the controller's adoption patch, or its
// cold create), that Sandbox is Ready and routable, and its daemon answers e2bapi.ProbePath with
// the sandbox's token. It does not wait for the claim's status write, which the controller makes
// in parallel.
func (f *FrontDoor) awaitDaemon(ctx context.Context, c *extensionsv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	var last string
	seen := false // the claim has been in the cache: its absence afterwards is a deletion
	// Registered before the first look at the cache, so no change after it goes unnoticed.
	changed, stop := f.waits.follow(c)
	defer stop()
	for {
		retry := (<-chan time.Time)(nil)
		present, msg, failed := claimState(ctx, f, c)
		switch {
		case failed:
			return nil, unservable(fmt.Sprintf("claim %s/%s cannot be served: %s", c.Namespace, c.Name, msg))
		case present:
			seen = true
		case seen:
			return nil, fmt.Errorf("claim %s/%s was deleted (expired or killed) before its sandbox was ready", c.Namespace, c.Name)
		}
		// The data plane finds a sandbox through its claim in this cache: until the claim is
		// there, the SDK's first command would be answered "sandbox not found".
		if sb, why, fatal := f.readySandbox(ctx, c.Namespace, c.Name, c.UID); fatal {
			return nil, unservable(why)
		} else if !present {
			last = fmt.Sprintf("the front door's cache does not show claim %s/%s yet", c.Namespace, c.Name)
		} else if sb == nil {
			last = why
		} else if err := f.timedProbe(ctx, sb); err != nil {
			f.stats.probes.WithLabelValues("refused").Inc()
			last = err.Error()
			retry = time.After(probeRetry)
		} else {
			f.stats.probes.WithLabelValues("ok").Inc()
			return sb, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s (%w)", last, ctx.Err())
		case <-changed:
		case <-retry:
		}
	}
}

// claimState reports whether the cache holds the claim (this UID, not being deleted), and the
// message of a Ready condition that carries a terminal reason.
func claimState(ctx context.Context, f *FrontDoor, want *extensionsv1beta1.SandboxClaim) (present bool, msg string, failed bool) {
	var c extensionsv1beta1.SandboxClaim
	if f.cache.Get(ctx, types.NamespacedName{Namespace: want.Namespace, Name: want.Name}, &c) != nil ||
		c.UID != want.UID || c.DeletionTimestamp != nil {
		return false, "", false
	}
	ready := meta.FindStatusCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionReady)
	if ready == nil || ready.Status == metav1.ConditionTrue || !claimFailures[ready.Reason] {
		return true, "", false
	}
	return true, ready.Reason + ": " + ready.Message, true
}

// readySandbox is the routable Sandbox bound to the claim in the cache, or nil and why not;
// fatal when waiting cannot help: the bound Sandbox's image or pod template cannot host sandboxd,
// or it does not declare the daemon's port, which the router's address policy requires of every
// port it dials.
func (f *FrontDoor) readySandbox(ctx context.Context, ns, name string, uid types.UID) (sb *agentsv1beta1.Sandbox, why string, fatal bool) {
	if sb = f.cachedSandbox(ctx, ns, uid); sb == nil {
		return nil, fmt.Sprintf("no Sandbox is bound to claim %s/%s yet", ns, name), false
	}
	if c := sb.CannotHostSandboxd(); c != nil {
		return nil, fmt.Sprintf("Sandbox %s/%s cannot serve the E2B SDK: %s: %s", ns, sb.Name, c.Reason, c.Message), true
	}
	if !resolve.DeclaresPort(sb, f.cfg.DaemonPort) {
		return nil, fmt.Sprintf("Sandbox %s/%s does not declare container port %d, where the E2B SDK reaches its daemon (envd); add it to the template's sandboxd container", ns, sb.Name, f.cfg.DaemonPort), true
	}
	if _, rerr := resolve.FromSandbox(sb, headers.Target{Namespace: ns, Name: sb.Name, Port: f.cfg.DaemonPort}, f.cfg.Policy); rerr != nil {
		return nil, rerr.Detail, false
	}
	// A warm Sandbox growing to the claim's resources answers before it has them, and may still
	// be given up for a cold one (docs/design/warm-resources.md): the create waits.
	if resizing, why := podresize.Resizing(sb); resizing {
		return nil, why, false
	}
	return sb, "", false
}

// timedProbe is probe, recorded in the create's steps.
func (f *FrontDoor) timedProbe(ctx context.Context, sb *agentsv1beta1.Sandbox) error {
	steps := stepsOf(ctx)
	start := time.Now()
	steps.markBound(start)
	err := f.probe(ctx, sb)
	end := time.Now()
	steps.markProbe(end.Sub(start), end, err == nil)
	return err
}

// probe calls e2bapi.ProbePath on the Sandbox's daemon with its token and reports why it refused.
func (f *FrontDoor) probe(ctx context.Context, sb *agentsv1beta1.Sandbox) error {
	ep, rerr := resolve.FromSandbox(sb, headers.Target{Namespace: sb.Namespace, Name: sb.Name, Port: f.cfg.DaemonPort}, f.cfg.Policy)
	if rerr != nil {
		return rerr
	}
	token, err := f.sandboxToken(sb)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ep.HostPort()+e2bapi.ProbePath, bytes.NewReader([]byte("{}")))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set(e2bapi.AccessTokenHeader, token)
	resp, err := f.cfg.Transport.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("the daemon of Sandbox %s/%s does not answer yet: %w", sb.Namespace, sb.Name, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the daemon of Sandbox %s/%s answers %s %d", sb.Namespace, sb.Name, e2bapi.ProbePath, resp.StatusCode)
	}
	return nil
}

// notifier wakes a create or connect waiting on one claim when that claim changes, or a Sandbox
// bound to it (labelled with its UID) does, and a snapshot or fork waiting on one SandboxSnapshot
// when that snapshot changes. Nothing else wakes it: a namespace's other claims,
// its pool members starting and refilling, keys and pools. Waking every wait of a namespace at
// every such change made each change cost a cache read and a daemon probe per wait in flight,
// which under a steady rate of creates is most of the front door's work.
type notifier struct {
	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{} // by claimKey and boundKey
}

// waiter is one wait; wake is signalled (never blocking, at most one pending) at each change.
type waiter struct {
	keys []string
	wake chan struct{}
}

func newNotifier() *notifier { return &notifier{waiters: map[string]map[*waiter]struct{}{}} }

func claimKey(ns, name string) string    { return "claim/" + ns + "/" + name }
func boundKey(uid types.UID) string      { return "bound/" + string(uid) }
func snapshotKey(ns, name string) string { return "snapshot/" + ns + "/" + name }

// follow registers a wait on the claim; its channel receives a signal at every later change of
// the claim or of a Sandbox bound to it. Call stop when the wait ends.
func (n *notifier) follow(c *extensionsv1beta1.SandboxClaim) (changed <-chan struct{}, stop func()) {
	return n.followKeys(claimKey(c.Namespace, c.Name), boundKey(c.UID))
}

// followKeys registers a wait on the objects keysOf maps to keys.
func (n *notifier) followKeys(keys ...string) (changed <-chan struct{}, stop func()) {
	w := &waiter{keys: keys, wake: make(chan struct{}, 1)}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range w.keys {
		if n.waiters[k] == nil {
			n.waiters[k] = map[*waiter]struct{}{}
		}
		n.waiters[k][w] = struct{}{}
	}
	return w.wake, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, k := range w.keys {
			delete(n.waiters[k], w)
			if len(n.waiters[k]) == 0 {
				delete(n.waiters, k)
			}
		}
	}
}

// keysOf are the waits an object's change concerns.
func keysOf(obj any) []string {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	switch o := obj.(type) {
	case *extensionsv1beta1.SandboxClaim:
		return []string{claimKey(o.Namespace, o.Name)}
	case *agentsv1beta1.Sandbox:
		if uid := o.Labels[agentsv1beta1.ClaimUIDLabel]; uid != "" {
			return []string{boundKey(types.UID(uid))}
		}
	case *snapshotsv1alpha1.SandboxSnapshot:
		return []string{snapshotKey(o.Namespace, o.Name)}
	}
	return nil
}

func (n *notifier) wake(obj any) {
	keys := keysOf(obj)
	if len(keys) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range keys {
		for w := range n.waiters[k] {
			select {
			case w.wake <- struct{}{}:
			default: // a signal is pending already
			}
		}
	}
}
