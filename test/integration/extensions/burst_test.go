package extensions

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

const (
	burstPool   = 100
	burstClaims = 300
	// burstTimeout bounds how long the burst may take on a loaded two-core machine; it is a
	// correctness deadline, not a performance threshold.
	burstTimeout = 5 * time.Minute
)

// TestBurstBindsEveryClaimExactlyOnce: 300 claims at once on a pool of 100 ready members.
func TestBurstBindsEveryClaimExactlyOnce(t *testing.T) { runBurst(t, false) }

// TestBurstSurvivesControllerRestart: the same, with the controller manager stopped and a new
// one (empty queues, expectations and bindings) started while the claims are being created.
func TestBurstSurvivesControllerRestart(t *testing.T) { runBurst(t, true) }

func runBurst(t *testing.T, restart bool) {
	h := controllers(t)
	ns := env.Namespace(t)
	readyPool(t, ns, "pool", burstPool, builder.MakeTemplate("tpl", ns), builder.MakeWarmPool("pool", ns, "tpl"))
	initial := memberUIDs(t, ns, "pool")

	// Refills stay Pending, so exactly the 100 initial members can be taken warm; everything
	// else (cold Sandboxes) becomes Ready.
	poolHash := blueprint.PoolHash("pool")
	h.readiness.SetDecision(func(sb *agentsv1beta1.Sandbox) framework.Readiness {
		if sb.Labels[agentsv1beta1.WarmPoolSandboxLabel] == poolHash && !initial[sb.UID] {
			return framework.Pending
		}
		return framework.Ready
	})
	maxMembers := watchMemberCount(t, ns, poolHash)
	start := time.Now()

	// With restart, the manager stops once the first half of the claims exist (their adoptions
	// and creates in flight), the second half arrives while no controller runs, and a new manager
	// with empty queues, expectations and bindings takes over.
	createClaims(t, ns, 1, burstClaims/2)
	if restart {
		h.stop()
		t.Logf("controllers stopped after %d claims were created", burstClaims/2)
	}
	createClaims(t, ns, burstClaims/2+1, burstClaims)
	if restart {
		if err := h.start(); err != nil {
			t.Fatalf("restarting controllers: %v", err)
		}
	}

	var claims extensionsv1beta1.SandboxClaimList
	framework.EventuallyWithin(t, burstTimeout, func(ctx context.Context) error {
		if err := env.Client.List(ctx, &claims, client.InNamespace(ns)); err != nil {
			return err
		}
		pending := 0
		for _, c := range claims.Items {
			if c.Status.Sandbox.Name == "" || builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionReady, metav1.ConditionTrue, "") != nil {
				pending++
			}
		}
		if pending > 0 {
			return fmt.Errorf("%d of %d claims not bound and Ready", pending, len(claims.Items))
		}
		return nil
	})
	t.Logf("%d claims bound and Ready %s after the first create", burstClaims, time.Since(start).Round(time.Millisecond))

	checkExactlyOnce(t, ns, claims.Items, initial)
	logWrites(t, ns)
	framework.EventuallyWithin(t, burstTimeout, func(ctx context.Context) error {
		p, err := get(ctx, ns, "pool", &extensionsv1beta1.SandboxWarmPool{})
		if err != nil {
			return err
		}
		ms, err := members(ctx, ns, "pool")
		if err != nil {
			return err
		}
		if p.Status.Replicas != burstPool || len(ms) != burstPool {
			return fmt.Errorf("pool refilled to %d members (status %d), want %d", len(ms), p.Status.Replicas, burstPool)
		}
		return nil
	})
	if got := maxMembers(); got > burstPool {
		t.Errorf("the pool held up to %d members, more than its %d replicas", got, burstPool)
	}
	h.readiness.SetDecision(nil)
	waitPoolReady(t, ns, "pool", burstPool)
}

// checkExactlyOnce verifies every claim is bound to its own Sandbox, which it controls, that
// the warm members went to exactly 100 claims and the others were served cold.
func checkExactlyOnce(t *testing.T, ns string, claims []extensionsv1beta1.SandboxClaim, initial map[types.UID]bool) {
	t.Helper()
	var sandboxes agentsv1beta1.SandboxList
	if err := env.Client.List(context.Background(), &sandboxes, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	byName := map[string]*agentsv1beta1.Sandbox{}
	controlledByClaims := 0
	for i := range sandboxes.Items {
		sb := &sandboxes.Items[i]
		byName[sb.Name] = sb
		if ref := metav1.GetControllerOf(sb); ref != nil && ref.Kind == "SandboxClaim" {
			controlledByClaims++
		}
	}
	if controlledByClaims != len(claims) {
		t.Errorf("%d Sandboxes are controlled by claims, want one per claim (%d)", controlledByClaims, len(claims))
	}
	boundTo := map[string]string{}
	launch := map[string]int{}
	warmTaken := 0
	for _, c := range claims {
		name := c.Status.Sandbox.Name
		if other, dup := boundTo[name]; dup {
			t.Errorf("Sandbox %s is bound to claims %s and %s", name, other, c.Name)
		}
		boundTo[name] = c.Name
		sb := byName[name]
		if sb == nil {
			t.Errorf("claim %s names Sandbox %s, which does not exist", c.Name, name)
			continue
		}
		if uid := metav1ControllerUID(sb); uid != c.UID {
			t.Errorf("Sandbox %s of claim %s is controlled by %q", name, c.Name, uid)
		}
		if sb.Labels[agentsv1beta1.ClaimUIDLabel] != string(c.UID) {
			t.Errorf("Sandbox %s of claim %s has claim-uid %q", name, c.Name, sb.Labels[agentsv1beta1.ClaimUIDLabel])
		}
		launch[sb.Labels[agentsv1beta1.LaunchTypeLabel]]++
		if initial[sb.UID] {
			warmTaken++
		}
	}
	if launch[agentsv1beta1.LaunchTypeWarm] != burstPool || launch[agentsv1beta1.LaunchTypeCold] != burstClaims-burstPool || warmTaken != burstPool {
		t.Errorf("launch types %v, %d initial members taken; want %d warm (all initial members) and %d cold",
			launch, warmTaken, burstPool, burstClaims-burstPool)
	}
}

// watchMemberCount follows the pool's members through a list and a watch after it, and returns a
// function that reports the largest number seen at once.
func watchMemberCount(t *testing.T, ns, poolHash string) func() int {
	t.Helper()
	return watchMostMembers(t, ns, poolHash, func(*agentsv1beta1.Sandbox) bool { return true })
}

// watchMostMembers follows the pool's members through a list and a watch after it, and returns a
// function that reports the largest number at once of those counts says to count (a member
// leaves the count when it is deleted or counts says no).
func watchMostMembers(t *testing.T, ns, poolHash string, counts func(*agentsv1beta1.Sandbox) bool) func() int {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var list agentsv1beta1.SandboxList
	sel := client.MatchingLabels{agentsv1beta1.WarmPoolSandboxLabel: poolHash}
	if err := wc.List(ctx, &list, client.InNamespace(ns), sel); err != nil {
		cancel()
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &agentsv1beta1.SandboxList{}, client.InNamespace(ns), sel, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	current := map[types.UID]bool{}
	for i := range list.Items {
		if counts(&list.Items[i]) {
			current[list.Items[i].UID] = true
		}
	}
	highest := len(current)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			sb, ok := ev.Object.(*agentsv1beta1.Sandbox)
			if !ok {
				continue
			}
			mu.Lock()
			if ev.Type != watch.Deleted && counts(sb) {
				current[sb.UID] = true
			} else {
				delete(current, sb.UID)
			}
			highest = max(highest, len(current))
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return highest
	}
}

// logWrites reports the writes each controller sent for the namespace (since the last restart),
// as numbers for the reader, not as assertions.
func logWrites(t *testing.T, ns string) {
	t.Helper()
	for _, name := range []string{"claim", "pool"} {
		byKind := map[string]int{}
		failed := 0
		for _, w := range controllers(t).writesOf(name).InNamespace(ns) {
			byKind[w.Verb+" "+w.Kind+"/"+w.Subresource]++
			if w.Err != nil {
				failed++
			}
		}
		t.Logf("%s controller writes: %v (%d failed, e.g. conflicts)", name, byKind, failed)
	}
}

// createClaims creates claims c-<from> to c-<to> from 20 goroutines at once.
func createClaims(t *testing.T, ns string, from, to int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, to-from+1)
	var next atomic.Int32
	next.Store(int32(from - 1))
	for range 20 {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= to; i = int(next.Add(1)) {
				if err := env.Client.Create(context.Background(), builder.MakeClaim(fmt.Sprintf("c-%03d", i), ns, "pool").Obj()); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating claim: %v", err)
	}
}
