package poolsafety

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
	// poolSize members race as many claims.
	poolSize = 40
	// burstTimeout bounds the burst on a loaded two-core machine; a correctness deadline, not a
	// performance threshold.
	burstTimeout = 5 * time.Minute
)

// TestScaleToZeroDuringBurstDeletesNoClaimedSandbox: claims adopt members while the pool is
// scaled to 0. Every member a claim took stays its Sandbox.
func TestScaleToZeroDuringBurstDeletesNoClaimedSandbox(t *testing.T) {
	runRace(t, builder.MakeWarmPool("pool", "", "tpl"), func(ctx context.Context, ns string) error {
		return patchPool(ctx, ns, func(p *extensionsv1beta1.SandboxWarmPool) { p.Spec.Replicas = new(int32) })
	})
}

// TestRolloutDuringBurstDeletesNoClaimedSandbox: claims adopt members while a template change
// makes every member stale under the Recreate strategy.
func TestRolloutDuringBurstDeletesNoClaimedSandbox(t *testing.T) {
	pool := builder.MakeWarmPool("pool", "", "tpl").UpdateStrategy(extensionsv1beta1.RecreateSandboxWarmPoolUpdateStrategyType)
	runRace(t, pool, func(ctx context.Context, ns string) error {
		tpl := &extensionsv1beta1.SandboxTemplate{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "tpl"}, tpl); err != nil {
			return err
		}
		orig := tpl.DeepCopy()
		tpl.Spec.PodTemplate.Spec.Containers[0].Image = "registry.example/rolled:2"
		return env.Client.Patch(ctx, tpl, client.MergeFrom(orig))
	})
}

// runRace fills a pool of poolSize Ready members, then creates poolSize claims while disrupt
// runs, and checks that no claim-controlled Sandbox was deleted and every claim still has the
// first Sandbox it took.
func runRace(t *testing.T, pool *builder.WarmPoolWrapper, disrupt func(ctx context.Context, ns string) error) {
	readiness.SetDecision(nil)
	ns := env.Namespace(t)
	ctx := framework.Context(t, 2*burstTimeout)
	p := pool.Replicas(poolSize).Obj()
	p.Namespace = ns
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, p)
	waitPoolReady(t, ns, "pool", poolSize)

	taken := watchClaimedSandboxes(t, ns)
	// The verdict on deletes stands even when a later wait fails.
	t.Cleanup(func() {
		if deleted, _ := taken(); len(deleted) > 0 {
			t.Errorf("the pool deleted %d Sandboxes that claims controlled: %v", len(deleted), deleted)
		}
	})
	var wg sync.WaitGroup
	wg.Go(func() { createClaims(t, ns, poolSize) })
	wg.Go(func() {
		if err := disrupt(ctx, ns); err != nil {
			t.Errorf("disrupting the pool: %v", err)
		}
	})
	wg.Wait()

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
	// The pool settles (scaled away or rolled out) before the verdict, so that late deletes count.
	framework.EventuallyWithin(t, burstTimeout, func(ctx context.Context) error {
		pl := &extensionsv1beta1.SandboxWarmPool{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pool"}, pl); err != nil {
			return err
		}
		ms, err := poolMembers(ctx, ns)
		if err != nil {
			return err
		}
		want := int(*pl.Spec.Replicas)
		if len(ms) != want || pl.Status.ReadyReplicas != int32(want) {
			return fmt.Errorf("pool holds %d members (%d ready), want %d", len(ms), pl.Status.ReadyReplicas, want)
		}
		return nil
	})

	_, first := taken()
	warm := 0
	for _, c := range claims.Items {
		sb := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: c.Status.Sandbox.Name}, sb); err != nil {
			t.Errorf("claim %s: reading its Sandbox %s: %v", c.Name, c.Status.Sandbox.Name, err)
			continue
		}
		if want, ok := first[c.UID]; ok && sb.UID != want {
			t.Errorf("claim %s moved from Sandbox UID %s to %s (%s)", c.Name, want, sb.UID, sb.Name)
		}
		if sb.Labels[agentsv1beta1.LaunchTypeLabel] == agentsv1beta1.LaunchTypeWarm {
			warm++
		}
	}
	t.Logf("%d claims, %d served warm during the disruption", len(claims.Items), warm)
}

// watchClaimedSandboxes follows the namespace's Sandboxes and returns a function reporting the
// claim-controlled Sandboxes that were deleted and the first Sandbox each claim controlled.
func watchClaimedSandboxes(t *testing.T, ns string) func() (deleted []string, first map[types.UID]types.UID) {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &agentsv1beta1.SandboxList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var gone []string
	firstOf := map[types.UID]types.UID{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			sb, ok := ev.Object.(*agentsv1beta1.Sandbox)
			if !ok {
				continue
			}
			ref := metav1.GetControllerOf(sb)
			if ref == nil || ref.Kind != "SandboxClaim" {
				continue
			}
			mu.Lock()
			if _, seen := firstOf[ref.UID]; !seen {
				firstOf[ref.UID] = sb.UID
			}
			if ev.Type == watch.Deleted || (ev.Type == watch.Modified && !sb.DeletionTimestamp.IsZero()) {
				gone = append(gone, sb.Name)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() ([]string, map[types.UID]types.UID) {
		mu.Lock()
		defer mu.Unlock()
		out := map[types.UID]types.UID{}
		for k, v := range firstOf {
			out[k] = v
		}
		return append([]string(nil), gone...), out
	}
}

// createClaims creates claims c-001 to c-<n> from 20 goroutines at once.
func createClaims(t *testing.T, ns string, n int) {
	var wg sync.WaitGroup
	var next atomic.Int32
	for range 20 {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= n; i = int(next.Add(1)) {
				if err := env.Client.Create(context.Background(), builder.MakeClaim(fmt.Sprintf("c-%03d", i), ns, "pool").Obj()); err != nil {
					t.Errorf("creating claim %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
}

func patchPool(ctx context.Context, ns string, mutate func(*extensionsv1beta1.SandboxWarmPool)) error {
	p := &extensionsv1beta1.SandboxWarmPool{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pool"}, p); err != nil {
		return err
	}
	orig := p.DeepCopy()
	mutate(p)
	return env.Client.Patch(ctx, p, client.MergeFrom(orig))
}

// poolMembers lists the Sandboxes carrying the pool's label, straight from the API server.
func poolMembers(ctx context.Context, ns string) ([]agentsv1beta1.Sandbox, error) {
	var list agentsv1beta1.SandboxList
	err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.WarmPoolSandboxLabel: blueprint.PoolHash("pool")})
	return list.Items, err
}

// waitPoolReady waits until the pool reports n ready members and holds exactly n.
func waitPoolReady(t *testing.T, ns, pool string, n int32) {
	t.Helper()
	framework.EventuallyWithin(t, burstTimeout, func(ctx context.Context) error {
		p := &extensionsv1beta1.SandboxWarmPool{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pool}, p); err != nil {
			return err
		}
		ms, err := poolMembers(ctx, ns)
		if err != nil {
			return err
		}
		if p.Status.ReadyReplicas != n || p.Status.Replicas != n || len(ms) != int(n) {
			return fmt.Errorf("pool %s: status %d/%d ready, %d members; want %d", pool, p.Status.ReadyReplicas, p.Status.Replicas, len(ms), n)
		}
		return nil
	})
}
