package extensions

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestPoolMembersAndStatus proves the members' shape (labels, owner, secure defaults) and the
// pool status, then scale-down and scale-up through spec.replicas.
func TestPoolMembersAndStatus(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	readyPool(t, ns, "pool", 3, builder.MakeTemplate("tpl", ns).PodLabel("team", "a"), builder.MakeWarmPool("pool", ns, "tpl"))
	ctx := framework.Context(t, framework.DefaultTimeout)

	pool, err := get(ctx, ns, "pool", &extensionsv1beta1.SandboxWarmPool{})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus := extensionsv1beta1.SandboxWarmPoolStatus{Replicas: 3, ReadyReplicas: 3, Selector: blueprint.PoolSelector("pool"), ObservedGeneration: pool.Generation}
	// The conditions are proven in test/integration/poolsafety.
	if diff := cmp.Diff(wantStatus, pool.Status, cmpopts.IgnoreFields(extensionsv1beta1.SandboxWarmPoolStatus{}, "Conditions")); diff != "" {
		t.Errorf("pool status (-want +got):\n%s", diff)
	}
	tpl, err := get(ctx, ns, "tpl", &extensionsv1beta1.SandboxTemplate{})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := members(ctx, ns, "pool")
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range ms {
		if ref := metav1ControllerUID(&sb); ref != pool.UID {
			t.Errorf("member %s controller UID = %q, want the pool's", sb.Name, ref)
		}
		for k, want := range map[string]string{
			agentsv1beta1.LaunchTypeLabel:             agentsv1beta1.LaunchTypeWarm,
			agentsv1beta1.SandboxTemplateRefHashLabel: blueprint.TemplateRefHash("tpl"),
			agentsv1beta1.SandboxTemplateHashLabel:    blueprint.Hash(tpl.Spec.SandboxBlueprint),
			agentsv1beta1.CreatedByLabel:              "controller",
		} {
			if got := sb.Labels[k]; got != want {
				t.Errorf("member %s label %s = %q, want %q", sb.Name, k, got, want)
			}
		}
		spec := sb.Spec.PodTemplate.Spec
		if !ptr.Equal(spec.AutomountServiceAccountToken, ptr.To(false)) || spec.DNSPolicy != corev1.DNSNone || spec.DNSConfig == nil {
			t.Errorf("member %s lacks secure defaults: automount %v, dnsPolicy %q, dnsConfig %v", sb.Name, spec.AutomountServiceAccountToken, spec.DNSPolicy, spec.DNSConfig)
		}
		if got := sb.Spec.PodTemplate.ObjectMeta.Annotations[agentsv1beta1.SafeToEvictAnnotation]; got != "true" {
			t.Errorf("member %s safe-to-evict = %q, want true", sb.Name, got)
		}
		if got := sb.Spec.PodTemplate.ObjectMeta.Labels["team"]; got != "a" {
			t.Errorf("member %s pod label team = %q, want the template's", sb.Name, got)
		}
	}

	scale(t, ns, "pool", 1)
	waitPoolReady(t, ns, "pool", 1)
	scale(t, ns, "pool", 4)
	waitPoolReady(t, ns, "pool", 4)
}

func scale(t *testing.T, ns, name string, n int32) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
	if err := env.Client.Patch(context.Background(), &extensionsv1beta1.SandboxWarmPool{ObjectMeta: objectMeta(ns, name)}, patch); err != nil {
		t.Fatalf("scaling pool %s to %d: %v", name, n, err)
	}
}

// TestPoolUpdateStrategies proves that a template change replaces members under Recreate and
// leaves them under OnReplenish, and that a metadata-only change replaces nothing.
func TestPoolUpdateStrategies(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	create(t, builder.MakeTemplate("tpl", ns).Obj())
	create(t, builder.MakeWarmPool("recreate", ns, "tpl").UpdateStrategy(extensionsv1beta1.RecreateSandboxWarmPoolUpdateStrategyType).Replicas(2).Obj())
	create(t, builder.MakeWarmPool("replenish", ns, "tpl").Replicas(2).Obj())
	waitPoolReady(t, ns, "recreate", 2)
	waitPoolReady(t, ns, "replenish", 2)
	before := memberUIDs(t, ns, "replenish")
	recreateBefore := memberUIDs(t, ns, "recreate")

	// A metadata-only edit replaces nothing. The member added by a scale-up carries the new
	// blueprint hash, which proves the pool saw the edit before the check.
	updateTemplate(t, ns, "tpl", func(tpl *extensionsv1beta1.SandboxTemplate) {
		tpl.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{"only": "metadata"}
	})
	tpl, err := get(context.Background(), ns, "tpl", &extensionsv1beta1.SandboxTemplate{})
	if err != nil {
		t.Fatal(err)
	}
	scale(t, ns, "recreate", 3)
	framework.Eventually(t, func(ctx context.Context) error {
		ms, err := members(ctx, ns, "recreate")
		if err != nil {
			return err
		}
		for _, sb := range ms {
			if sb.Labels[agentsv1beta1.SandboxTemplateHashLabel] == blueprint.Hash(tpl.Spec.SandboxBlueprint) {
				return nil
			}
		}
		return fmt.Errorf("no member made from the edited template yet")
	})
	waitPoolReady(t, ns, "recreate", 3)
	for uid := range recreateBefore {
		if !memberUIDs(t, ns, "recreate")[uid] {
			t.Errorf("Recreate pool replaced member %s after a metadata-only edit", uid)
		}
	}
	scale(t, ns, "recreate", 2)
	waitPoolReady(t, ns, "recreate", 2)
	recreateBefore = memberUIDs(t, ns, "recreate")

	// A claimed member of the Recreate pool is no member any more: the rollout leaves it alone.
	create(t, builder.MakeClaim("claimed", ns, "recreate").Obj())
	_, claimed := waitClaimReady(t, ns, "claimed")
	if !recreateBefore[claimed.UID] {
		t.Fatalf("claim was served cold, want a warm member of the recreate pool")
	}
	waitPoolReady(t, ns, "recreate", 2)
	recreateBefore = memberUIDs(t, ns, "recreate")

	updateTemplate(t, ns, "tpl", func(tpl *extensionsv1beta1.SandboxTemplate) {
		tpl.Spec.PodTemplate.Spec.Containers[0].Image = "registry.invalid/paddock/test:v2"
	})
	framework.EventuallyWithin(t, 2*framework.DefaultTimeout, func(ctx context.Context) error {
		ms, err := members(ctx, ns, "recreate")
		if err != nil {
			return err
		}
		if len(ms) != 2 {
			return fmt.Errorf("recreate pool has %d members, want 2", len(ms))
		}
		for _, sb := range ms {
			if recreateBefore[sb.UID] || sb.Spec.PodTemplate.Spec.Containers[0].Image != "registry.invalid/paddock/test:v2" {
				return fmt.Errorf("member %s not replaced yet", sb.Name)
			}
		}
		return nil
	})
	waitPoolReady(t, ns, "recreate", 2)
	after, err := get(context.Background(), ns, claimed.Name, &agentsv1beta1.Sandbox{})
	if err != nil {
		t.Fatalf("claimed Sandbox: %v", err)
	}
	if after.UID != claimed.UID || after.Spec.PodTemplate.Spec.Containers[0].Image != builder.DefaultImage {
		t.Errorf("the rollout touched the claimed Sandbox: UID %s (was %s), image %q", after.UID, claimed.UID, after.Spec.PodTemplate.Spec.Containers[0].Image)
	}
	if diff := cmp.Diff(before, memberUIDs(t, ns, "replenish")); diff != "" {
		t.Errorf("OnReplenish pool replaced members (-before +after):\n%s", diff)
	}
}

func memberUIDs(t *testing.T, ns, pool string) map[types.UID]bool {
	t.Helper()
	ms, err := members(context.Background(), ns, pool)
	if err != nil {
		t.Fatal(err)
	}
	out := map[types.UID]bool{}
	for _, sb := range ms {
		out[sb.UID] = true
	}
	return out
}

func updateTemplate(t *testing.T, ns, name string, mutate func(*extensionsv1beta1.SandboxTemplate)) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		tpl, err := get(ctx, ns, name, &extensionsv1beta1.SandboxTemplate{})
		if err != nil {
			return err
		}
		mutate(tpl)
		return env.Client.Update(ctx, tpl)
	})
}

// TestPoolReplacesStuckAndHoldsUnschedulable proves that members not Ready past the grace
// period are replaced, unless their Pod is unschedulable: those are held, with an event.
func TestPoolReplacesStuckAndHoldsUnschedulable(t *testing.T) {
	h := controllers(t)
	opts := sandboxwarmpool.DefaultOptions()
	opts.ReadinessGracePeriod, opts.UnschedulableRecheckInterval = 2*time.Second, time.Second
	h.restart(t, opts)
	t.Cleanup(func() { h.restart(t, sandboxwarmpool.DefaultOptions()) })
	ns := env.Namespace(t)

	// Every member of "stuck" stays Pending; replacements keep coming and the count never grows.
	stuckHash := blueprint.PoolHash("stuck")
	unschedHash := blueprint.PoolHash("unsched")
	h.readiness.SetDecision(func(sb *agentsv1beta1.Sandbox) framework.Readiness {
		switch sb.Labels[agentsv1beta1.WarmPoolSandboxLabel] {
		case stuckHash:
			return framework.Pending
		case unschedHash:
			return framework.Unschedulable
		}
		return framework.Ready
	})
	create(t, builder.MakeTemplate("tpl", ns).Obj())
	create(t, builder.MakeWarmPool("stuck", ns, "tpl").Replicas(1).Obj())
	create(t, builder.MakeWarmPool("unsched", ns, "tpl").Replicas(1).Obj())
	first := map[types.UID]bool{}
	framework.Eventually(t, func(ctx context.Context) error {
		ms, err := members(ctx, ns, "stuck")
		if err != nil || len(ms) != 1 {
			return fmt.Errorf("stuck pool members: %d (%v)", len(ms), err)
		}
		first[ms[0].UID] = true
		return nil
	})
	framework.Eventually(t, func(ctx context.Context) error {
		ms, err := members(ctx, ns, "stuck")
		if err != nil {
			return err
		}
		if len(ms) > 1 {
			return fmt.Errorf("stuck pool holds %d members, more than its 1 replica", len(ms))
		}
		if len(ms) == 1 && !first[ms[0].UID] {
			return nil
		}
		return fmt.Errorf("stuck member not replaced yet")
	})
	held := memberUIDs(t, ns, "unsched")
	framework.Eventually(t, func(ctx context.Context) error {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == sandboxwarmpool.ReasonNotProgressing && e.InvolvedObject.Name == "unsched" {
				return nil
			}
		}
		return fmt.Errorf("no %s event for pool unsched", sandboxwarmpool.ReasonNotProgressing)
	})
	if diff := cmp.Diff(held, memberUIDs(t, ns, "unsched")); diff != "" {
		t.Errorf("unschedulable member was replaced (-before +after):\n%s", diff)
	}
}

// TestPoolMaxStarting: with MaxStarting 1 a pool of 4 caps its starts only while it has Ready
// members to spare (at least half of its replicas, warmpool.SpareReady). Members start only when
// the test lets them. The empty pool starts all 4 at once; with 3 and then 2 of 4 Ready it has one
// member starting and holds the next; with 1 of 4 Ready it starts every missing member at once.
func TestPoolMaxStarting(t *testing.T) {
	h := controllers(t)
	opts := sandboxwarmpool.DefaultOptions()
	opts.MaxStarting = 1
	h.restart(t, opts)
	t.Cleanup(func() { h.restart(t, sandboxwarmpool.DefaultOptions()) })
	ns := env.Namespace(t)
	hash := blueprint.PoolHash("paced")
	var mu sync.Mutex
	started := map[string]bool{}
	release := func(names ...string) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range names {
			started[n] = true
		}
	}
	h.readiness.SetDecision(func(sb *agentsv1beta1.Sandbox) framework.Readiness {
		mu.Lock()
		defer mu.Unlock()
		if sb.Labels[agentsv1beta1.WarmPoolSandboxLabel] == hash && !started[sb.Name] {
			return framework.Pending
		}
		return framework.Ready
	})
	create(t, builder.MakeTemplate("tpl", ns).Obj())
	create(t, builder.MakeWarmPool("paced", ns, "tpl").Replicas(4).Obj())

	// Empty, the pool has nothing to spare: all 4 start although the cap is 1.
	release(waitStarting(t, ns, "paced", 4, 4)...)
	waitPoolReady(t, ns, "paced", 4)
	mostStarting := watchStartingCount(t, ns, hash)

	// 3 of 4 Ready: one replacement starts.
	deleteReadyMember(t, ns, "paced")
	first := waitStarting(t, ns, "paced", 4, 1)
	// 2 of 4 Ready is still half: the second replacement waits for the first.
	deleteReadyMember(t, ns, "paced")
	waitPoolStatus(t, ns, "paced", 3, 2)
	waitStarting(t, ns, "paced", 3, 1)
	if got := mostStarting(); got != 1 {
		t.Errorf("with Ready members to spare, at most %d members were starting at once, want 1 (MaxStarting)", got)
	}
	// 1 of 4 Ready: the pool is about to run dry and starts both missing members at once.
	deleteReadyMember(t, ns, "paced")
	rest := waitStarting(t, ns, "paced", 4, 3)
	release(append(first, rest...)...)
	waitPoolReady(t, ns, "paced", 4)
	if got := mostStarting(); got != 3 {
		t.Errorf("with 1 of 4 Ready, at most %d members were starting at once, want 3 (cap lifted)", got)
	}
}

// waitStarting waits until the pool holds total members of which starting are not Ready, and
// returns the names of those.
func waitStarting(t *testing.T, ns, pool string, total, starting int) []string {
	t.Helper()
	var waiting []string
	framework.Eventually(t, func(ctx context.Context) error {
		ms, err := members(ctx, ns, pool)
		if err != nil {
			return err
		}
		waiting = waiting[:0]
		for _, sb := range ms {
			if !apimeta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
				waiting = append(waiting, sb.Name)
			}
		}
		if len(ms) != total || len(waiting) != starting {
			return fmt.Errorf("pool %s holds %d members, %d not Ready; want %d and %d", pool, len(ms), len(waiting), total, starting)
		}
		return nil
	})
	return waiting
}

// waitPoolStatus waits until the pool's status reports replicas and ready members.
func waitPoolStatus(t *testing.T, ns, pool string, replicas, ready int32) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		p, err := get(ctx, ns, pool, &extensionsv1beta1.SandboxWarmPool{})
		if err != nil {
			return err
		}
		if p.Status.Replicas != replicas || p.Status.ReadyReplicas != ready {
			return fmt.Errorf("pool %s status says %d replicas, %d ready; want %d and %d", pool, p.Status.Replicas, p.Status.ReadyReplicas, replicas, ready)
		}
		return nil
	})
}

// deleteReadyMember deletes one Ready member of the pool, as a claim taking it would remove it.
func deleteReadyMember(t *testing.T, ns, pool string) {
	t.Helper()
	ms, err := members(context.Background(), ns, pool)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ms {
		if apimeta.IsStatusConditionTrue(ms[i].Status.Conditions, agentsv1beta1.SandboxConditionReady) {
			if err := env.Client.Delete(context.Background(), &ms[i]); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("pool %s has no Ready member to delete", pool)
}

// watchStartingCount follows the pool's members and returns a function that reports the largest
// number of them not Ready at once.
func watchStartingCount(t *testing.T, ns, poolHash string) func() int {
	t.Helper()
	return watchMostMembers(t, ns, poolHash, func(sb *agentsv1beta1.Sandbox) bool {
		return !apimeta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	})
}

// TestPoolStatusCountsMembersItCreates: the pass that replaces a taken member reports the
// replacement in status.replicas at once, so a refill moves only readyReplicas: replicas never
// reads one short while the pool is full of members, Ready or starting. (It cost a count-only
// status write per refill slower than the pacing interval: docs/performance/results.md, "API
// writes of one warm claim".) The pool's clock is stepped past the pacing interval, so no write is
// held back and every status the pool computes is written and seen.
func TestPoolStatusCountsMembersItCreates(t *testing.T) {
	h := controllers(t)
	clk := clocktesting.NewFakeClock(time.Now())
	opts := sandboxwarmpool.DefaultOptions()
	opts.Clock = clk
	h.restart(t, opts)
	t.Cleanup(func() { h.restart(t, sandboxwarmpool.DefaultOptions()) })
	ns := env.Namespace(t)
	hash := blueprint.PoolHash("counted")
	var mu sync.Mutex
	filled := false
	h.readiness.SetDecision(func(sb *agentsv1beta1.Sandbox) framework.Readiness {
		mu.Lock()
		defer mu.Unlock()
		if filled && sb.Labels[agentsv1beta1.WarmPoolSandboxLabel] == hash && !apimeta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
			return framework.Pending // replacements start only when the test lets them
		}
		return framework.Ready
	})
	create(t, builder.MakeTemplate("tpl", ns).Obj())
	create(t, builder.MakeWarmPool("counted", ns, "tpl").Replicas(3).Obj())
	// The pool's clock moves only when the test steps it: two seconds at every look (past the pacing interval, far from the grace period),
	// so count-only writes are let through.
	framework.Eventually(t, func(ctx context.Context) error {
		clk.Step(2 * time.Second)
		p, err := get(ctx, ns, "counted", &extensionsv1beta1.SandboxWarmPool{})
		if err != nil {
			return err
		}
		if p.Status.ReadyReplicas != 3 {
			// A member event brings the pool's next pass, which sees the stepped clock.
			return fmt.Errorf("pool counted: %d of 3 members Ready in its status", p.Status.ReadyReplicas)
		}
		return nil
	})
	mu.Lock()
	filled = true
	mu.Unlock()

	statuses := watchPoolStatuses(t, ns, "counted")
	clk.Step(2 * time.Second)
	create(t, builder.MakeClaim("taker", ns, "counted").Obj()) // adopts a Ready member
	waitStarting(t, ns, "counted", 3, 1)
	framework.Eventually(t, func(ctx context.Context) error {
		clk.Step(2 * time.Second)
		p, err := get(ctx, ns, "counted", &extensionsv1beta1.SandboxWarmPool{})
		if err != nil {
			return err
		}
		if p.Status.Replicas != 3 || p.Status.ReadyReplicas != 2 {
			return fmt.Errorf("pool counted status says %d replicas, %d ready; want 3 and 2", p.Status.Replicas, p.Status.ReadyReplicas)
		}
		return nil
	})
	for _, s := range statuses() {
		if s.Replicas != 3 {
			t.Errorf("the pool wrote status.replicas %d (ready %d) while it held or was creating 3 members", s.Replicas, s.ReadyReplicas)
		}
	}
}

// watchPoolStatuses follows one pool from now on and returns a function that reports every status
// seen, in order.
func watchPoolStatuses(t *testing.T, ns, name string) func() []extensionsv1beta1.SandboxWarmPoolStatus {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pool := &extensionsv1beta1.SandboxWarmPool{}
	if err := wc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pool); err != nil {
		cancel()
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &extensionsv1beta1.SandboxWarmPoolList{}, client.InNamespace(ns),
		client.MatchingFields{"metadata.name": name}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: pool.ResourceVersion}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []extensionsv1beta1.SandboxWarmPoolStatus
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*extensionsv1beta1.SandboxWarmPool); ok {
				mu.Lock()
				seen = append(seen, *p.Status.DeepCopy())
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() []extensionsv1beta1.SandboxWarmPoolStatus {
		mu.Lock()
		defer mu.Unlock()
		return append([]extensionsv1beta1.SandboxWarmPoolStatus(nil), seen...)
	}
}
