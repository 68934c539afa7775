package e2b

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestNotifierWakesOnlyTheClaimsWait: a wait follows its claim and the Sandbox bound to it, and
// nothing else of the namespace.
func TestNotifierWakesOnlyTheClaimsWait(t *testing.T) {
	n := newNotifier()
	claim := &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "abc", UID: "uid-abc"}}
	changed, stop := n.follow(claim)

	member := func(name, claimUID string) *agentsv1beta1.Sandbox {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, Labels: map[string]string{}}}
		if claimUID != "" {
			sb.Labels[agentsv1beta1.ClaimUIDLabel] = claimUID
		}
		return sb
	}
	for _, other := range []any{
		&extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "other", UID: "uid-other"}},
		&extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "abc", UID: "uid-x"}},
		member("pool-unclaimed", ""),
		member("pool-taken", "uid-other"),
		&extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "base"}},
	} {
		n.wake(other)
		if woken(changed) {
			t.Errorf("the wait on claim team/abc was woken by %T %+v", other, other)
		}
	}
	for _, mine := range []any{
		claim,
		member("pool-adopted", "uid-abc"),
		toolscache.DeletedFinalStateUnknown{Key: "team/abc", Obj: claim},
	} {
		n.wake(mine)
		n.wake(mine) // a second change while one is pending does not block
		if !woken(changed) {
			t.Errorf("the wait on claim team/abc was not woken by %T", mine)
		}
	}
	stop()
	if len(n.waiters) != 0 {
		t.Errorf("%d keys left after the wait stopped", len(n.waiters))
	}
}

// laggingCache serves one routable Sandbox bound to the claim, and the claim itself only once
// claimVisible is set: a claim informer behind the Sandbox informer.
type laggingCache struct {
	cache.Cache
	claim        *extensionsv1beta1.SandboxClaim
	sandbox      *agentsv1beta1.Sandbox
	claimVisible atomic.Bool
	// lookups, when set, receives one signal per claim lookup.
	lookups chan struct{}
}

func (c *laggingCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	claim, ok := obj.(*extensionsv1beta1.SandboxClaim)
	if ok && c.lookups != nil {
		c.lookups <- struct{}{}
	}
	if !ok || !c.claimVisible.Load() || key.Name != c.claim.Name {
		return apierrors.NewNotFound(extensionsv1beta1.GroupVersion.WithResource("sandboxclaims").GroupResource(), key.Name)
	}
	c.claim.DeepCopyInto(claim)
	return nil
}

func (c *laggingCache) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if l, ok := list.(*agentsv1beta1.SandboxList); ok {
		l.Items = []agentsv1beta1.Sandbox{*c.sandbox.DeepCopy()}
	}
	return nil
}

type fixedTokens struct{}

func (fixedTokens) SandboxToken(string, string, types.UID) (string, error) { return "token", nil }
func (fixedTokens) KeyErr() error                                          { return nil }

type okDaemon struct{ calls atomic.Int32 }

func (d *okDaemon) RoundTrip(*http.Request) (*http.Response, error) {
	d.calls.Add(1)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// TestCreateWaitsForTheClaimInTheCache: create answers only once the data plane, which finds a
// sandbox through its claim in the cache, can route the SDK's first command.
func TestCreateWaitsForTheClaimInTheCache(t *testing.T) {
	claim := &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "abc", UID: "uid-abc"}}
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "pool-x", UID: "uid-x", Labels: map[string]string{agentsv1beta1.ClaimUIDLabel: "uid-abc"}},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "sandboxd", Ports: []corev1.ContainerPort{{ContainerPort: e2bapi.EnvdPort}}}}}}}},
		Status: agentsv1beta1.SandboxStatus{PodIPs: []string{"198.18.0.10"},
			Conditions: []metav1.Condition{{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue}}},
	}
	const rounds = 5
	lag := &laggingCache{claim: claim, sandbox: sb, lookups: make(chan struct{}, rounds+8)}
	daemon := &okDaemon{}
	f := &FrontDoor{cfg: Config{Tokens: fixedTokens{}, Transport: daemon, DaemonPort: e2bapi.EnvdPort}, cache: lag, waits: newNotifier(), stats: newMetrics(nil)}

	done := make(chan error, 1)
	go func() {
		_, err := f.awaitDaemon(context.Background(), claim)
		done <- err
	}()
	// Without its claim in the cache the wait neither answers nor probes, however often it is
	// woken: each wake below is followed by the wait's next look at the cache, which it reaches
	// only by not having answered after the previous one.
	<-lag.lookups
	for range rounds {
		f.waits.wake(claim)
		select {
		case err := <-done:
			t.Fatalf("create answered (%v) before the front door's cache had its claim", err)
		case <-lag.lookups:
		}
	}
	if n := daemon.calls.Load(); n != 0 {
		t.Errorf("the daemon was probed %d times before the claim was in the cache", n)
	}
	lag.claimVisible.Store(true)
	f.waits.wake(claim)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("awaitDaemon: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("create did not answer once its claim was in the cache")
	}
}
