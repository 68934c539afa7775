// Package claimwrites counts every API write one warm claim costs, the pool's refill included, on
// a real kube-apiserver with every Paddock controller running as paddock-controller --extensions
// runs them (per-Sandbox credentials on). The test plays the scheduler (one binding per Pod) and a
// kubelet whose containers start at once (one Pod status write per Pod), as KWOK does in
// `make bench`. Claims are made one at a time, each after the pool has settled, and the writes
// are read from the API server's own request counter (apiserver_request_total), so the count does
// not depend on the machine's speed. The list per verb and resource, with where each write comes
// from, is in docs/performance/results.md ("API writes of one warm claim"). The counter is the
// whole API server's: tests of this package must not run in parallel.
package claimwrites

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/bench"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		return framework.StartControllersWith(e, func(o *manager.Options) {
			// A member's start-up status is held until its Pod is Ready however slow this machine
			// is (default 1s): the count must not depend on the machine's speed. Where a member
			// takes longer than the window to start, it costs one more Sandbox status write.
			o.SandboxStatusCoalesceWindow = time.Minute
		}, noop.NewTracerProvider())
	})
}

// perClaim is every API write one warm claim costs, everything counted: the claim's create, the
// controllers' writes for it and for the member that replaces it, the scheduler's binding and the
// kubelet's status write of the new Pod, and events; all but the pool's status, which is paced
// (poolStatusMost). Change it only with docs/performance/results.md ("API writes of one warm
// claim") saying which write was added or removed and why.
var perClaim = bench.Writes{
	"POST sandboxclaims.extensions.agents.x-k8s.io":         1, // the user's create
	"PATCH sandboxes.agents.x-k8s.io":                       1, // claim controller: the adoption
	"PATCH sandboxclaims.extensions.agents.x-k8s.io/status": 1, // claim controller: bound and Ready
	"POST events.events.k8s.io":                             1, // claim controller: SandboxAdopted
	"PATCH pods":                                            1, // Sandbox controller: the claim's identity on the adopted Pod
	"PATCH sandboxes.agents.x-k8s.io/status":                2, // Sandbox controller: adopted generation; new member Ready
	"POST sandboxes.agents.x-k8s.io":                        1, // pool controller: the new member
	"POST secrets":                                          1, // Sandbox controller: the new member's credentials
	"POST pods":                                             1, // Sandbox controller: the new member's Pod
	"POST pods/binding":                                     1, // scheduler (played)
	"PATCH pods/status":                                     1, // kubelet (played)
}

// poolStatusKey is the pool's status write. Only its replica counts move with a warm claim, and
// count-only writes are paced to one a second per pool: a claim costs at most two (the member
// taken, the replacement Ready), none when the pool's last write was under a second before and
// the replacement was Ready within it.
const (
	poolStatusKey  = "PATCH sandboxwarmpools.extensions.agents.x-k8s.io/status"
	poolStatusMost = 2
)

// poolSize and claims: enough claims that each member the pool started with is taken, and the
// pool's own refills are counted too.
const (
	poolSize = 3
	claims   = 5
)

func TestWarmClaimWrites(t *testing.T) {
	ctx := framework.Context(t, 5*time.Minute)
	ns := env.Namespace(t)
	playSchedulerAndKubelet(t, ns)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(poolSize).Obj())
	waitSettled(t, ns, "")

	var total bench.Writes
	for i := range claims {
		before := apiWrites(t)
		name := fmt.Sprintf("claim-%d", i)
		framework.MustCreate(t, ctx, env.Client, builder.MakeClaim(name, ns, "pool").Obj())
		waitSettled(t, ns, name)
		got := apiWrites(t).Sub(before)
		t.Logf("%s: %v API writes:\n%s", name, got.Total(), render(got))
		total = add(total, got)
		pool := got[poolStatusKey]
		delete(got, poolStatusKey)
		if diff := cmp.Diff(perClaim, got); diff != "" {
			t.Errorf("%s: API writes other than the pool's status (-want +got):\n%s", name, diff)
		}
		if pool > poolStatusMost {
			t.Errorf("%s: %v pool status writes, want at most %d", name, pool, poolStatusMost)
		}
	}
	t.Logf("%d warm claims, %v API writes, %.2f per claim:\n%s", claims, total.Total(), total.Total()/claims, render(total))
}

// waitSettled waits until the pool holds poolSize members Ready at their generation (so are their
// Pods), each with its credentials Secret, the pool's status says so, and, when claim is not empty, the claim is Ready
// on an adopted member whose status speaks of the adopting generation and whose Pod carries the
// claim's identity. Every write the claim causes has then been made: what is left to change would
// change one of those.
func waitSettled(t *testing.T, ns, claim string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		if claim != "" {
			if err := claimSettled(ctx, ns, claim); err != nil {
				return err
			}
		}
		return poolSettled(ctx, ns, "pool")
	})
}

func claimSettled(ctx context.Context, ns, name string) error {
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim); err != nil {
		return err
	}
	if !apimeta.IsStatusConditionTrue(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady) || claim.Status.Sandbox.Name == "" {
		return fmt.Errorf("claim %s is not Ready on a Sandbox yet: %+v", name, claim.Status)
	}
	sb := &agentsv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim.Status.Sandbox.Name}, sb); err != nil {
		return err
	}
	if sb.Labels[agentsv1beta1.LaunchTypeLabel] != agentsv1beta1.LaunchTypeWarm || !blueprint.ControlledBy(sb, claim) {
		return fmt.Errorf("claim %s was served by Sandbox %s, which is not a warm member it adopted (labels %v)", name, sb.Name, sb.Labels)
	}
	if err := readyAtGeneration(sb); err != nil {
		return err
	}
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sb.Name}, pod); err != nil {
		return err
	}
	if pod.Labels[agentsv1beta1.ClaimUIDLabel] != string(claim.UID) || pod.Labels[agentsv1beta1.WarmPoolSandboxLabel] != "" {
		return fmt.Errorf("pod %s does not carry claim %s's identity yet: labels %v", pod.Name, name, pod.Labels)
	}
	return nil
}

func poolSettled(ctx context.Context, ns, name string) error {
	pool := &extensionsv1beta1.SandboxWarmPool{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pool); err != nil {
		return err
	}
	if s := pool.Status; s.Replicas != poolSize || s.ReadyReplicas != poolSize || s.ObservedGeneration != pool.Generation {
		return fmt.Errorf("pool %s status is %+v, want %d Ready replicas at generation %d", name, s, poolSize, pool.Generation)
	}
	var members agentsv1beta1.SandboxList
	if err := env.Client.List(ctx, &members, client.InNamespace(ns),
		client.MatchingLabels{agentsv1beta1.WarmPoolSandboxLabel: blueprint.PoolHash(name)}); err != nil {
		return err
	}
	if len(members.Items) != poolSize {
		return fmt.Errorf("pool %s has %d members, want %d", name, len(members.Items), poolSize)
	}
	for i := range members.Items {
		sb := &members.Items[i]
		if err := readyAtGeneration(sb); err != nil {
			return err
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: credentials.SandboxSecretName(sb.Name)}, &corev1.Secret{}); err != nil {
			return fmt.Errorf("credentials of member %s: %w", sb.Name, err)
		}
	}
	return nil
}

func readyAtGeneration(sb *agentsv1beta1.Sandbox) error {
	c := apimeta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != sb.Generation {
		return fmt.Errorf("sandbox %s is not Ready at generation %d: %+v", sb.Name, sb.Generation, c)
	}
	return nil
}

// apiWrites reads the API server's request counter: every write since it started, by verb and
// resource, events included.
func apiWrites(t *testing.T) bench.Writes {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	w, err := bench.ParseWritesWithEvents(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func add(a, b bench.Writes) bench.Writes {
	out := bench.Writes{}
	for _, w := range []bench.Writes{a, b} {
		for k, v := range w {
			out[k] += v
		}
	}
	return out
}

func render(w bench.Writes) string {
	var b strings.Builder
	for _, k := range w.Keys() {
		fmt.Fprintf(&b, "  %s: %v\n", k, w[k])
	}
	return b.String()
}

// playSchedulerAndKubelet binds every new Pod of ns to a node and then marks it Running and Ready
// with one status patch each, as the scheduler and a kubelet whose containers start at once
// would (KWOK in `make bench` writes the same two). Each Pod is handled once.
func playSchedulerAndKubelet(t *testing.T, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	var mu sync.Mutex
	done := map[string]bool{}
	go func() {
		defer close(stopped)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var pods corev1.PodList
			if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					mu.Lock()
					handled := done[string(p.UID)]
					mu.Unlock()
					if handled || p.DeletionTimestamp != nil {
						continue
					}
					if err := startPod(ctx, p); err != nil {
						if !apierrors.IsNotFound(err) && ctx.Err() == nil {
							t.Errorf("playing the kubelet for pod %s: %v", p.Name, err)
						}
						continue
					}
					mu.Lock()
					done[string(p.UID)] = true
					mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// startPod binds the Pod (unless bound) and writes Running and Ready in one merge patch without a
// resourceVersion, so a concurrent metadata patch by the Sandbox controller costs no retry.
func startPod(ctx context.Context, p *corev1.Pod) error {
	if p.Spec.NodeName == "" {
		if err := framework.BindPod(ctx, env.Client, p, "node-1"); err != nil {
			return err
		}
	}
	base := p.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	framework.SetPodCondition(p, corev1.PodScheduled, corev1.ConditionTrue, "")
	framework.SetPodCondition(p, corev1.PodReady, corev1.ConditionTrue, "")
	p.Status.PodIP, p.Status.PodIPs = framework.PodIP, []corev1.PodIP{{IP: framework.PodIP}}
	return env.Client.Status().Patch(ctx, p, client.MergeFrom(base))
}
