package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// Scenario is one bounded measurement.
type Scenario struct {
	Kind string
	// PoolSize is the warm pool's replicas (warm only).
	PoolSize int
	// Count is how many claims (warm) or Sandboxes (cold) to create.
	Count int
	// Rate is creations per second; 0 creates all at once. Cold scenarios always create at once.
	Rate float64
	// Timeout bounds the wait for the pool to fill and, separately, for every object to be Ready.
	Timeout time.Duration
	// RefillWindow bounds the wait for the pool to be full again after the last claim, during
	// which writes are still counted.
	RefillWindow time.Duration
	// Concurrency and LoadRequests shape a runtime scenario's throughput measurement:
	// LoadRequests requests from Concurrency clients at once, each way (0 requests skips it).
	// Count is then the number of round trips measured one at a time.
	Concurrency  int
	LoadRequests int
	// Namespace, when set, is an existing namespace to run in (an e2b scenario with a given API
	// key); the scenario then deletes only what it made there.
	Namespace string
	// IdleCPU, when set, is the e2b pool's paddock.dev/idle-cpu.
	IdleCPU string
	// ExistingTemplate, when set, is the template in Namespace that the e2b creates ask for,
	// served by its own pool: the scenario makes no template or pool and deletes nothing but
	// its creates' sandboxes.
	ExistingTemplate string
}

// idleName is the part of an e2b scenario's name that says its pool's idle CPU.
func (s Scenario) idleName() string {
	if s.IdleCPU == "" {
		return ""
	}
	return ", idle cpu " + s.IdleCPU
}

// Name describes the scenario in tables and file names.
func (s Scenario) Name() string {
	switch {
	case s.Kind == KindCold:
		return fmt.Sprintf("cold, %d Sandboxes at once", s.Count)
	case s.Kind == KindHold:
		return fmt.Sprintf("hold %d Sandboxes, restart the controller", s.Count)
	case s.Kind == KindE2B && s.ExistingTemplate != "":
		rate := "burst"
		if s.Rate > 0 {
			rate = fmt.Sprintf("%g/s", s.Rate)
		}
		return fmt.Sprintf("e2b %s, %d creates, pool of %s/%s", rate, s.Count, s.Namespace, s.ExistingTemplate)
	case s.Kind == KindE2B && s.Rate == 0:
		return fmt.Sprintf("e2b burst, %d creates, pool %d%s", s.Count, s.PoolSize, s.idleName())
	case s.Kind == KindE2B:
		return fmt.Sprintf("e2b %g/s, %d creates, pool %d%s", s.Rate, s.Count, s.PoolSize, s.idleName())
	case s.Kind == KindRuntime:
		return fmt.Sprintf("runtime, %d round trips, %d requests from %d clients", s.Count, s.LoadRequests, s.Concurrency)
	case s.Rate == 0:
		return fmt.Sprintf("warm burst, %d claims, pool %d", s.Count, s.PoolSize)
	default:
		return fmt.Sprintf("warm %g/s, %d claims, pool %d", s.Rate, s.Count, s.PoolSize)
	}
}

// Validate names the first field that makes the scenario impossible to run.
func (s Scenario) Validate() error {
	switch {
	case s.Kind != KindWarm && s.Kind != KindCold && s.Kind != KindHold && s.Kind != KindRuntime && s.Kind != KindE2B:
		return fmt.Errorf("scenario kind %q: use %q, %q, %q, %q or %q", s.Kind, KindWarm, KindCold, KindHold, KindRuntime, KindE2B)
	case s.Count < 1:
		return fmt.Errorf("count %d: create at least one object", s.Count)
	case (s.Kind == KindWarm || s.Kind == KindE2B) && s.PoolSize < 1:
		return fmt.Errorf("pool size %d: a %s scenario needs a pool of at least 1", s.PoolSize, s.Kind)
	case s.Namespace != "" && s.Kind != KindE2B:
		return fmt.Errorf("namespace %q: only an e2b scenario runs in a given namespace", s.Namespace)
	case s.Rate < 0:
		return fmt.Errorf("rate %g: use a positive rate per second, or 0 for all at once", s.Rate)
	case s.Timeout <= 0:
		return fmt.Errorf("timeout %s: every scenario needs a positive bound", s.Timeout)
	case s.Kind == KindRuntime && s.LoadRequests < 0:
		return fmt.Errorf("load requests %d: give 0 to skip the throughput measurement or a positive count", s.LoadRequests)
	case s.Kind == KindRuntime && s.LoadRequests > 0 && s.Concurrency < 1:
		return fmt.Errorf("concurrency %d: the throughput measurement needs at least one client", s.Concurrency)
	}
	return nil
}

// Run runs one scenario in a namespace of its own and deletes the namespace afterwards.
func (r *Runner) Run(ctx context.Context, s Scenario) (Result, error) {
	return r.RunThen(ctx, s, nil)
}

// RunThen is Run with a hook: done gets the result after the measurement and before the cleanup,
// which for thousands of objects takes minutes, so a caller can save the numbers first.
func (r *Runner) RunThen(ctx context.Context, s Scenario, done func(Result)) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	ns, cleanup, err := s.Namespace, r.objectsCleanup(s.Namespace, max(time.Minute, s.Timeout)), error(nil)
	if s.ExistingTemplate != "" {
		cleanup = func() {}
	}
	if s.Namespace == "" {
		ns, cleanup, err = r.namespace(ctx, max(time.Minute, s.Timeout))
	}
	if err != nil {
		return Result{}, err
	}
	defer cleanup()
	res, err := r.runIn(ctx, ns, s)
	if err == nil && done != nil {
		done(res)
	}
	return res, err
}

// runIn runs the scenario in the namespace ns.
func (r *Runner) runIn(ctx context.Context, ns string, s Scenario) (Result, error) {
	log := klog.FromContext(ctx).WithValues("scenario", s.Name(), "namespace", ns)
	if s.Kind == KindWarm {
		if err := r.fillPool(ctx, ns, s); err != nil {
			return Result{}, err
		}
		log.Info("Warm pool is full; creating claims")
	}
	objects, err := r.countObjects(ctx)
	if err != nil {
		return Result{}, err
	}
	measure := r.measure
	switch s.Kind {
	case KindHold:
		measure = r.hold
	case KindRuntime:
		measure = r.runtime
	case KindE2B:
		measure = r.e2bScenario
	}
	res, err := measure(ctx, ns, s)
	if err != nil {
		return Result{}, err
	}
	res.ObjectsBefore, res.LoadAverage = objects, loadAverage()
	if m := res.E2B; m != nil {
		log.Info("Scenario done", "created", m.Created, "warm", m.Warm, "createP50", m.Create.P50, "createP99", m.Create.P99,
			"firstInstructionP50", m.FirstInstruction.P50, "firstInstructionP99", m.FirstInstruction.P99, "problems", m.Problems)
	} else if m := res.Runtime; m != nil {
		log.Info("Scenario done", "execP50", m.Exec.P50, "execRoutedP50", m.ExecRouted.P50, "routedPerSecond", m.LoadRouted.PerSecond, "problems", m.Problems)
	} else {
		log.Info("Scenario done", "ready", res.Ready, "p50", res.Latency.P50, "p99", res.Latency.P99, "writesPerObject", res.WritesPerClaim)
	}
	return res, nil
}

func (r *Runner) fillPool(ctx context.Context, ns string, s Scenario) error {
	if err := r.c.Create(ctx, newTemplate(ns, r.image, r.onKWOK)); err != nil {
		return fmt.Errorf("creating SandboxTemplate %s/%s: %w", ns, templateName, err)
	}
	if err := r.c.Create(ctx, newPool(ns, s.PoolSize)); err != nil {
		return fmt.Errorf("creating SandboxWarmPool %s/%s: %w", ns, poolName, err)
	}
	return r.waitPoolFull(ctx, ns, s.PoolSize, s.Timeout)
}

// measure creates the objects, waits for them to be Ready (and the pool to refill) and counts
// the API writes in between.
func (r *Runner) measure(ctx context.Context, ns string, s Scenario) (Result, error) {
	tr := newTracker(s.Count)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var list client.ObjectList = &extensionsv1beta1.SandboxClaimList{}
	if s.Kind == KindCold {
		list = &agentsv1beta1.SandboxList{}
	}
	if err := watchReady(watchCtx, r.c, list, ns, tr); err != nil {
		return Result{}, err
	}
	before, readsBefore, err := r.requests(ctx)
	if err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	r.create(ctx, ns, s, tr)
	waitCtx, cancel := context.WithTimeout(ctx, s.Timeout)
	tr.wait(waitCtx)
	cancel()
	res := result(s, t0, tr)
	// Reads are counted up to the last Ready only: the harness then only creates and watches,
	// while its refill wait below polls.
	if _, readsAfter, err := r.requests(ctx); err == nil {
		res.Reads = readsAfter.Sub(readsBefore)
	}
	if s.Kind == KindWarm {
		refillStart := time.Now()
		res.RefillComplete = r.waitPoolFull(ctx, ns, s.PoolSize, s.RefillWindow) == nil
		res.RefillSeconds = time.Since(refillStart).Seconds()
	}
	after, err := r.Writes(ctx)
	if err != nil {
		return Result{}, err
	}
	res.Writes = after.Sub(before)
	res.WritesPerClaim = res.Writes.Total() / float64(s.Count)
	return res, nil
}

// create issues the creates open-loop: each at its slot on the rate's schedule, in its own
// goroutine, so a slow API call delays no later create. It returns once every call returned.
func (r *Runner) create(ctx context.Context, ns string, s Scenario, tr *tracker) {
	var wg sync.WaitGroup
	start := time.Now()
	for i := range s.Count {
		if s.Rate > 0 && s.Kind == KindWarm {
			slot := start.Add(time.Duration(float64(i) / s.Rate * float64(time.Second)))
			if d := time.Until(slot); d > 0 {
				timer := time.NewTimer(d)
				select {
				case <-ctx.Done():
					timer.Stop()
					wg.Wait()
					return
				case <-timer.C:
				}
			}
		}
		var obj client.Object
		if s.Kind == KindCold {
			obj = newSandbox(ns, objectName("sb", i), r.image, r.onKWOK)
		} else {
			obj = newClaim(ns, objectName("claim", i))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr.start(obj.GetName(), time.Now())
			if err := r.c.Create(ctx, obj); err != nil {
				tr.fail(obj.GetName(), err)
			}
		}()
	}
	wg.Wait()
}

// result turns the tracker's times into samples and statistics.
func result(s Scenario, t0 time.Time, tr *tracker) Result {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	res := Result{Name: s.Name(), Kind: s.Kind, Count: s.Count, Rate: s.Rate, PoolSize: s.PoolSize, Writes: Writes{}}
	var latencies []float64
	var last time.Time
	for name, started := range tr.started {
		smp := Sample{Name: name, StartSeconds: started.Sub(t0).Seconds()}
		if err, failed := tr.failed[name]; failed {
			smp.Error = err.Error()
			res.Failed++
		} else if at, ok := tr.ready[name]; ok {
			smp.Ready, smp.LatencySeconds = true, at.Sub(started).Seconds()
			latencies = append(latencies, smp.LatencySeconds)
			res.Ready++
			if at.After(last) {
				last = at
			}
		}
		res.Samples = append(res.Samples, smp)
	}
	sort.Slice(res.Samples, func(i, j int) bool { return res.Samples[i].Name < res.Samples[j].Name })
	res.Latency = Summarize(latencies)
	if res.Ready > 0 {
		res.AllReadySeconds = last.Sub(t0).Seconds()
	}
	return res
}
