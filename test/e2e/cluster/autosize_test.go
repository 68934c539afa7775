package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

const (
	// autosizeClaimEvery paces the stream of claims (a load shape, not a synchronisation), and
	// autosizeMaxClaims bounds it, so the node holds at most that many extra busybox Pods.
	autosizeClaimEvery = 500 * time.Millisecond
	autosizeMaxClaims  = 40
	// autosizeShrinkTimeout covers the installed controller's windows (claims counted for 1
	// minute, a shrink after 5 minutes of lower demand) with room for a loaded node; a
	// correctness deadline, not a performance threshold.
	autosizeShrinkTimeout = 9 * time.Minute
)

// testAutosize: on the real node with the installed controller and its default windows, a pool
// with paddock.dev/autosize (minimum 1, maximum 4) grows its spec.replicas above the minimum under
// a stream of claims, with an Autosized event for the decision, and comes back to the minimum
// after the stream stops, with an Autosized event naming the stabilization window.
func testAutosize(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 15*time.Minute)
	c := paddockClient(t)
	tpl := builder.MakeTemplate("grow", ns).Image(*imageFlag).Command([]string{"sh", "-c", "sleep 3600; : " + marker}).Obj()
	tpl.Spec.PodTemplate.Spec.TerminationGracePeriodSeconds = ptr[int64](1)
	framework.MustCreate(t, ctx, c, tpl)
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("grow", ns, "grow").Replicas(1).Autosize(1, 4, 1).Obj())
	waitPoolReady(t, c, ns, "grow", 1)

	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1) // buffered: a failed test does not leave the stream blocked
	go func() {
		n := 0
		defer func() { done <- n }()
		ticker := time.NewTicker(autosizeClaimEvery)
		defer ticker.Stop()
		for ; n < autosizeMaxClaims; n++ {
			select {
			case <-streamCtx.Done():
				return
			case <-ticker.C:
			}
			if err := c.Create(streamCtx, builder.MakeClaim(fmt.Sprintf("claim-%d", n), ns, "grow").Obj()); err != nil && streamCtx.Err() == nil {
				t.Errorf("creating claim %d: %v", n, err)
				return
			}
		}
	}()
	var grown int32
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error {
		n, err := specReplicas(ctx, c, ns, "grow")
		if err != nil {
			return err
		}
		if n <= 1 {
			return fmt.Errorf("spec.replicas is %d under the stream of claims, want it above the minimum 1", n)
		}
		grown = n
		return nil
	})
	stop()
	claims := <-done
	t.Logf("spec.replicas grew to %d after %d claims at one per %s", grown, claims, autosizeClaimEvery)
	up := waitAutosized(t, c, ns, "grow", func(msg string) bool { return strings.HasPrefix(msg, "spec.replicas 1 -> ") })
	t.Logf("up: %s", up)

	// The claims keep their Sandboxes; the pool's demand is what it saw, and it falls once the
	// claims leave the rate window and the stabilization window has passed.
	framework.EventuallyWithin(t, autosizeShrinkTimeout, func(ctx context.Context) error {
		n, err := specReplicas(ctx, c, ns, "grow")
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("spec.replicas is %d after the stream, want it back at the minimum 1", n)
		}
		return nil
	})
	down := waitAutosized(t, c, ns, "grow", func(msg string) bool {
		return strings.HasSuffix(strings.SplitN(msg, ":", 2)[0], " -> 1") && strings.Contains(msg, "for 5m0s")
	})
	t.Logf("down: %s", down)
}

func specReplicas(ctx context.Context, c client.Client, ns, name string) (int32, error) {
	p := &extensionsv1beta1.SandboxWarmPool{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		return 0, err
	}
	if p.Spec.Replicas == nil {
		return 0, fmt.Errorf("pool %s/%s has no spec.replicas", ns, name)
	}
	return *p.Spec.Replicas, nil
}

// waitAutosized waits for an Autosized event of the pool whose message matches, and returns it.
func waitAutosized(t *testing.T, c client.Client, ns, pool string, match func(string) bool) string {
	t.Helper()
	var found string
	framework.EventuallyWithin(t, time.Minute, func(ctx context.Context) error {
		var events corev1.EventList
		if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind != "SandboxWarmPool" || e.InvolvedObject.Name != pool || e.Reason != sandboxwarmpool.ReasonAutosized {
				continue
			}
			if match(e.Message) {
				found = e.Message
				return nil
			}
			seen = append(seen, e.Message)
		}
		return fmt.Errorf("no matching Autosized event for pool %s/%s; seen %q", ns, pool, seen)
	})
	return found
}
