package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// snapshotBenchSamples is how many sandboxes are started one after another from the snapshot,
// cold and from its warm pool.
const snapshotBenchSamples = 3

// snapshotBench measures on the real node what issue 28 asks (docs/performance/results.md): a
// snapshot of a sandbox that wrote 10 MB, then one of 500 MB (create to Ready, pause, layer
// bytes in the registry), sandboxes started from the first one at a time cold (a pool without
// members) and from its warm pool, and a fork of PADDOCK_BENCH_FORKS (default 10) claims at
// once of a pool without members. The
// figures are logged; nothing is asserted on speed. It runs only with PADDOCK_BENCH_SNAPSHOTS=1:
// it is a benchmark, and starts some twenty sandboxes per runtime.
func snapshotBench(t *testing.T, gvisor bool) {
	if os.Getenv("PADDOCK_BENCH_SNAPSHOTS") != "1" {
		t.Skip("a benchmark: set PADDOCK_BENCH_SNAPSHOTS=1 to run it")
	}
	forks := 10
	if v := os.Getenv("PADDOCK_BENCH_FORKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PADDOCK_BENCH_FORKS=%q: want a positive count of forks", v)
		}
		forks = n
	}
	ns := namespace(t)
	ctx := framework.Context(t, 30*time.Minute)
	c := paddockClient(t)
	src := sandboxdSandbox(t, "source", ns).Obj()
	if !gvisor {
		src.Spec.PodTemplate.Spec.RuntimeClassName = nil
	} else if rc := src.Spec.PodTemplate.Spec.RuntimeClassName; rc == nil || *rc != devcluster.GVisorRuntimeClass {
		t.Fatalf("the example template runs under %v, want %s", rc, devcluster.GVisorRuntimeClass)
	}
	// Every sandbox started from the snapshot copies the source's requests: 10m CPU each lets the
	// fork of 50 fit the 2-CPU node (the example template's 100m would hold about fifteen).
	src.Spec.PodTemplate.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("10m")
	framework.MustCreate(t, ctx, c, src)
	run := sandboxRunner(t, ctx, c, src, waitSandboxReady(t, c, src))
	run("sh", "-c", "head -c 10485760 /dev/urandom > /home/user/ten-mb")
	snap, snapshotTime := benchSnapshot(t, ctx, c, ns, "snap", src.Name)
	added, total := registryLayerBytes(t, snap.Status.Image)
	runtime := map[bool]string{true: "gVisor", false: "runc"}[gvisor]
	t.Logf("snapshot bench (%s): snapshot of 10 MB written %s (source paused %v ms, layer %v bytes; in the registry: added layer %d bytes, image %d bytes)",
		runtime, snapshotTime.Round(time.Millisecond), deref(snap.Status.PausedMilliseconds), deref(snap.Status.SizeBytes), added, total)

	// 500 MB of changes: 490 MB more on top of the 10 MB (random, so the layer does not compress).
	run("sh", "-c", "head -c 513802240 /dev/urandom > /home/user/big")
	big, bigTime := benchSnapshot(t, ctx, c, ns, "snap-500", src.Name)
	bigAdded, bigTotal := registryLayerBytes(t, big.Status.Image)
	t.Logf("snapshot bench (%s): snapshot of 500 MB written %s (source paused %v ms, layer %v bytes; in the registry: added layer %d bytes, image %d bytes)",
		runtime, bigTime.Round(time.Millisecond), deref(big.Status.PausedMilliseconds), deref(big.Status.SizeBytes), bigAdded, bigTotal)
	if err := c.Delete(ctx, big); err != nil {
		t.Fatal(err)
	}

	tpl := snap.Status.TemplateName
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("cold", ns, tpl).Replicas(0).Obj())
	cold := make([]time.Duration, 0, snapshotBenchSamples)
	for i := range snapshotBenchSamples {
		cold = append(cold, claimReadyTimes(t, ctx, c, ns, "cold", fmt.Sprintf("cold-%d", i), 1)[0])
	}
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("warm", ns, tpl).Replicas(snapshotBenchSamples).Obj())
	waitPoolReady(t, c, ns, "warm", snapshotBenchSamples)
	warm := make([]time.Duration, 0, snapshotBenchSamples)
	for i := range snapshotBenchSamples {
		warm = append(warm, claimReadyTimes(t, ctx, c, ns, "warm", fmt.Sprintf("warm-%d", i), 1)[0])
	}
	// Free the node for the fork (the warm pool would refill alongside it too), and wait until
	// only the source's Pod is left.
	if err := c.Delete(ctx, &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warm"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteAllOf(ctx, &extensionsv1beta1.SandboxClaim{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) > 1 {
			return fmt.Errorf("%d Pods left in %s; waiting for the source's alone", len(pods.Items), ns)
		}
		return nil
	})
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("fork", ns, tpl).Replicas(0).Obj())
	forked := claimReadyTimes(t, ctx, c, ns, "fork", "fork", forks)

	t.Logf("snapshot bench (%s): create from the snapshot one at a time, cold: %s", runtime, durations(cold))
	t.Logf("snapshot bench (%s): create from the snapshot's warm pool one at a time: %s", runtime, durations(warm))
	t.Logf("snapshot bench (%s): fork of %d (claims at once, pool without members): all Ready after %s; each: %s",
		runtime, forks, slices.Max(forked).Round(time.Millisecond), durations(forked))
}

// benchSnapshot snapshots the Sandbox src as name and returns it Ready, with the time from its
// create call to its Ready condition.
func benchSnapshot(t *testing.T, ctx context.Context, c client.Client, ns, name, src string) (*snapshotsv1alpha1.SandboxSnapshot, time.Duration) {
	t.Helper()
	start := time.Now()
	framework.MustCreate(t, ctx, c, builder.MakeSnapshot(name, ns, src).Obj())
	snap := &snapshotsv1alpha1.SandboxSnapshot{}
	framework.EventuallyWithin(t, 10*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, snap); err != nil {
			return err
		}
		if snap.Status.Phase == snapshotsv1alpha1.SnapshotPhaseFailed {
			return nil
		}
		return builder.HasCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionReady, metav1.ConditionTrue, "")
	})
	took := time.Since(start)
	if snap.Status.Phase != snapshotsv1alpha1.SnapshotPhaseReady {
		t.Fatalf("snapshot %s is %s: %s", name, snap.Status.Phase, builder.FormatConditions(snap.Status.Conditions))
	}
	return snap, took
}

// claimReadyTimes creates n claims of pool at once (named prefix or prefix-i) and returns, for
// each, the time from the first create to its Ready condition, sorted.
func claimReadyTimes(t *testing.T, ctx context.Context, c client.Client, ns, pool, prefix string, n int) []time.Duration {
	t.Helper()
	names := []string{prefix}
	if n > 1 {
		names = names[:0]
		for i := range n {
			names = append(names, fmt.Sprintf("%s-%d", prefix, i))
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Create(ctx, builder.MakeClaim(name, ns, pool).Obj())
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("creating claims of %s: %v", pool, err)
		}
	}
	ready := map[string]time.Duration{}
	framework.EventuallyWithin(t, 15*time.Minute, func(ctx context.Context) error {
		for _, name := range names {
			if _, ok := ready[name]; ok {
				continue
			}
			var claim extensionsv1beta1.SandboxClaim
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &claim); err != nil {
				return err
			}
			if builder.HasCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady, metav1.ConditionTrue, "") == nil {
				ready[name] = time.Since(start)
			}
		}
		if len(ready) < n {
			return fmt.Errorf("%d of %d claims of pool %s Ready", len(ready), n, pool)
		}
		return nil
	})
	out := make([]time.Duration, 0, n)
	for _, d := range ready {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// registryLayerBytes reads image's manifest from the registry: the compressed size of its last
// layer (what the snapshot added) and of all its layers.
func registryLayerBytes(t *testing.T, image string) (added, total int64) {
	t.Helper()
	ref, err := name.ParseReference(image)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("reading %s from the registry: %v", image, err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Layers {
		total += l.Size
	}
	if len(m.Layers) > 0 {
		added = m.Layers[len(m.Layers)-1].Size
	}
	return added, total
}

// durations renders samples in order as "a, b, c (median m)".
func durations(ds []time.Duration) string {
	sorted := slices.Sorted(slices.Values(ds))
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += ", "
		}
		s += d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%s (median %s)", s, sorted[len(sorted)/2].Round(time.Millisecond))
}
