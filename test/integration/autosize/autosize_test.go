package autosize

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

const (
	// startup is how long the stand-in keeps a new Sandbox not Ready, as a starting Pod is, so
	// that a pool of one cannot keep up with the stream of claims.
	startup = 2 * time.Second
	// claimEvery paces the stream of claims: a load shape, not a synchronisation.
	claimEvery = 250 * time.Millisecond
	// grown is the size the pool must reach under the stream; the maximum is above it.
	grown = 4
	// phaseTimeout bounds growing and shrinking on a loaded two-core machine; a correctness
	// deadline, not a performance threshold.
	phaseTimeout = 3 * time.Minute
)

// TestPoolGrowsUnderClaimsAndShrinksAfter: a pool with autosize on grows under a steady stream of
// claims, shows it as spec.replicas through the scale subresource with an Autosized event and the
// decision metrics, and goes back to its minimum once the stream stops. A pool whose minimum is
// zero has no member for any claim to take: it learns the demand, and the start-up time, from the
// claims served cold.
func TestPoolGrowsUnderClaimsAndShrinksAfter(t *testing.T) {
	for _, least := range []int32{1, 0} {
		t.Run(fmt.Sprintf("from %d", least), func(t *testing.T) { growAndShrink(t, least) })
	}
}

func growAndShrink(t *testing.T, least int32) {
	readiness.SetDecision(func(sb *agentsv1beta1.Sandbox) framework.Readiness {
		if time.Since(sb.CreationTimestamp.Time) < startup {
			return framework.Pending
		}
		return framework.Ready
	})
	t.Cleanup(func() { readiness.SetDecision(nil) })
	reg := prometheus.NewRegistry()
	if err := sandboxwarmpool.RegisterMetrics(reg, env.Client); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	ctx := framework.Context(t, 3*phaseTimeout)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(least).Autosize(int(least), 6, 1).Obj())
	waitPoolCondition(t, ns, "pool", extensionsv1beta1.PoolConditionAutosizing, metav1.ConditionTrue, extensionsv1beta1.PoolReasonAutosizeActive)

	stop := streamClaims(t, ctx, ns, "pool")
	framework.EventuallyWithin(t, phaseTimeout, func(ctx context.Context) error {
		return poolReplicas(ctx, ns, "pool", func(n int32) bool { return n >= grown }, fmt.Sprintf("at least %d under the stream", grown))
	})
	stop()

	scale := &autoscalingv1.Scale{}
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}}
	if err := env.Client.SubResource("scale").Get(ctx, pool, scale); err != nil {
		t.Fatalf("reading the pool's scale subresource: %v", err)
	}
	if scale.Spec.Replicas < grown {
		t.Errorf("scale subresource spec.replicas = %d, want the autosized %d or more", scale.Spec.Replicas, grown)
	}
	waitAutosizedEvent(t, ns, "pool", func(msg string) bool { return strings.HasPrefix(msg, fmt.Sprintf("spec.replicas %d -> ", least)) })
	if n := metricValue(t, reg, "paddock_warmpool_autosize_decisions_total", ns, "pool", "up"); n < 1 {
		t.Errorf("paddock_warmpool_autosize_decisions_total{direction=up} = %v, want at least 1", n)
	}

	framework.EventuallyWithin(t, phaseTimeout, func(ctx context.Context) error {
		return poolReplicas(ctx, ns, "pool", func(n int32) bool { return n == least }, fmt.Sprintf("the minimum %d after the stream stopped", least))
	})
	waitAutosizedEvent(t, ns, "pool", func(msg string) bool {
		return strings.Contains(msg, fmt.Sprintf(" -> %d: demand stayed at or below %d", least, least))
	})
	if n := metricValue(t, reg, "paddock_warmpool_autosize_decisions_total", ns, "pool", "down"); n < 1 {
		t.Errorf("paddock_warmpool_autosize_decisions_total{direction=down} = %v, want at least 1", n)
	}
	if n := metricValue(t, reg, "paddock_warmpool_autosize_replicas", ns, "pool", ""); n != float64(least) {
		t.Errorf("paddock_warmpool_autosize_replicas = %v, want %d", n, least)
	}
}

// TestBadAnnotationIsNamed: an autosize annotation the controller cannot use turns Autosizing
// False naming it, with a Warning event, and leaves spec.replicas alone; fixing it resumes
// autosize.
func TestBadAnnotationIsNamed(t *testing.T) {
	readiness.SetDecision(nil)
	ns := env.Namespace(t)
	ctx := framework.Context(t, 2*phaseTimeout)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(2).
		Annotation(extensionsv1beta1.AutosizeAnnotation, "true").Annotation(extensionsv1beta1.AutosizeMaxAnnotation, "many").Obj())
	waitPoolCondition(t, ns, "pool", extensionsv1beta1.PoolConditionAutosizing, metav1.ConditionFalse, extensionsv1beta1.PoolReasonAutosizeInvalid)
	pool := &extensionsv1beta1.SandboxWarmPool{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pool"}, pool); err != nil {
		t.Fatal(err)
	}
	const want = `metadata.annotations[paddock.dev/autosize-max]: "many" is not an integer from 1 to 10000`
	if c := findCondition(pool, extensionsv1beta1.PoolConditionAutosizing); !strings.Contains(c.Message, want) {
		t.Errorf("Autosizing message %q, want it to contain %q", c.Message, want)
	}
	if *pool.Spec.Replicas != 2 {
		t.Errorf("spec.replicas = %d with a bad annotation, want the user's 2", *pool.Spec.Replicas)
	}
	waitPoolEvent(t, ns, "pool", corev1.EventTypeWarning, extensionsv1beta1.PoolReasonAutosizeInvalid, func(msg string) bool { return strings.Contains(msg, want) })

	orig := pool.DeepCopy()
	pool.Annotations[extensionsv1beta1.AutosizeMaxAnnotation] = "5"
	pool.Annotations[extensionsv1beta1.AutosizeMinAnnotation] = "3"
	if err := env.Client.Patch(ctx, pool, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	waitPoolCondition(t, ns, "pool", extensionsv1beta1.PoolConditionAutosizing, metav1.ConditionTrue, extensionsv1beta1.PoolReasonAutosizeActive)
	framework.EventuallyWithin(t, phaseTimeout, func(ctx context.Context) error {
		return poolReplicas(ctx, ns, "pool", func(n int32) bool { return n == 3 }, "3 after the minimum became 3")
	})
}

// streamClaims creates a claim on pool every claimEvery until the returned function is called,
// which waits for the stream to end.
func streamClaims(t *testing.T, ctx context.Context, ns, pool string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		ticker := time.NewTicker(claimEvery)
		defer ticker.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if err := env.Client.Create(ctx, builder.MakeClaim(fmt.Sprintf("claim-%d", i), ns, pool).Obj()); err != nil && ctx.Err() == nil {
				t.Errorf("creating claim %d: %v", i, err)
				return
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return func() { cancel(); wg.Wait() }
}

// poolReplicas checks the pool's spec.replicas against want, saying what it is otherwise.
func poolReplicas(ctx context.Context, ns, name string, want func(int32) bool, what string) error {
	p := &extensionsv1beta1.SandboxWarmPool{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
		return err
	}
	if n := *p.Spec.Replicas; !want(n) {
		return fmt.Errorf("spec.replicas of pool %s/%s is %d, want %s", ns, name, n, what)
	}
	return nil
}

func findCondition(p *extensionsv1beta1.SandboxWarmPool, t string) metav1.Condition {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

func waitPoolCondition(t *testing.T, ns, name, condType string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	framework.EventuallyWithin(t, phaseTimeout, func(ctx context.Context) error {
		p := &extensionsv1beta1.SandboxWarmPool{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		return builder.HasCondition(p.Status.Conditions, condType, status, reason)
	})
}

func waitAutosizedEvent(t *testing.T, ns, pool string, match func(string) bool) {
	t.Helper()
	waitPoolEvent(t, ns, pool, corev1.EventTypeNormal, sandboxwarmpool.ReasonAutosized, match)
}

// waitPoolEvent waits for an event of the pool with the given type and reason whose message
// matches.
func waitPoolEvent(t *testing.T, ns, pool, eventType, reason string, match func(string) bool) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind != "SandboxWarmPool" || e.InvolvedObject.Name != pool || e.Reason != reason || e.Type != eventType {
				continue
			}
			if match(e.Message) {
				return nil
			}
			seen = append(seen, e.Message)
		}
		return fmt.Errorf("no matching %s event %s for pool %s; seen %q", eventType, reason, pool, seen)
	})
}

// metricValue gathers reg and returns the value of the series of name for the pool (and
// direction, when not empty); 0 when there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name, ns, pool, direction string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] != ns || labels["warmpool"] != pool || labels["direction"] != direction {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
