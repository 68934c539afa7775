package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/e2baccess"
)

// The targets for the e2b scenario at 20 creates per second, on 2 cores.
const (
	e2bTargetCreateP50 = 0.030
	e2bTargetCreateP99 = 0.100
	e2bTargetFirstP50  = 0.040
)

// E2BTarget is where the e2b scenario finds the E2B front door, and what its sandboxes run.
type E2BTarget struct {
	// APIURL is the front door (the router's E2B listener), used as both E2B_API_URL and
	// E2B_SANDBOX_URL; empty finds a Ready router Pod in RouterNamespace and uses its IP on
	// e2b.DefaultPort.
	APIURL          string
	RouterNamespace string
	// APIKey, when set, is used as given and Namespace names the namespace it is bound to, where
	// the scenario then makes its template and pool. Empty: the scenario creates a key bound to
	// its own namespace in KeysNamespace and deletes it afterwards.
	APIKey        string
	Namespace     string
	KeysNamespace string
	// Template is namespace/name of the SandboxTemplate the pool's members copy (volumes
	// dropped): it must run sandboxd with envd's port declared and /bin/bash.
	Template string
	// SettleLoad, when above 0, holds the creates after the pool is full until the harness
	// machine's 1-minute load average is at most this (bounded by the scenario's timeout): the
	// pool's members starting and the previous scenario's teardown otherwise share the measured
	// window on a small node.
	SettleLoad float64
	// ExistingPool sends the creates to Template itself, served by its own pool, instead of to
	// a copy with a pool the scenario makes (Scenario.ExistingTemplate).
	ExistingPool bool
	// SecondCommand runs a second commands.run('true') after each create's first and reports it
	// apart (E2B.Steps.SecondInstruction).
	SecondCommand bool
	// KillAfterCommand kills each sandbox once its commands ran, as an agent that is done does,
	// so that a long stream holds only the sandboxes in flight, not every one it made: a node
	// holds a bounded number of Pods (the kubelet's maxPods, 110 by default). Whether a pool
	// member served the create is read from its claim before the kill.
	KillAfterCommand bool
	// NodeCPU reads /proc before the first create and after the last first command, and
	// reports where the machine's CPU went (E2B.NodeCPU): meaningful when the harness runs on
	// the cluster's only node.
	NodeCPU bool
}

// DefaultE2BTarget is the front door and `base` template that `paddock dev up` installs.
func DefaultE2BTarget() E2BTarget {
	return E2BTarget{RouterNamespace: "paddock-system", KeysNamespace: e2b.DefaultAPIKeyNamespace,
		Template: "default/" + e2b.DefaultTemplate}
}

// Validate names the flag at fault.
func (t E2BTarget) Validate() error {
	var errs []error
	if (t.APIKey == "") != (t.Namespace == "") {
		errs = append(errs, errors.New("--e2b-api-key and --e2b-namespace go together: a given key is bound to one namespace, where the scenario makes its pool; give both, or neither to let the scenario create a key"))
	}
	if t.APIKey == "" && t.KeysNamespace == "" {
		errs = append(errs, errors.New("--e2b-api-key-namespace is empty: give the router's --e2b-api-key-namespace (default "+e2b.DefaultAPIKeyNamespace+")"))
	}
	if t.NodeCPU {
		if _, err := readBusy("/proc/stat"); err != nil {
			errs = append(errs, fmt.Errorf("--e2b-node-cpu reads the machine's /proc, which it cannot here (%w): run the harness on the cluster's node, a Linux machine, or leave the flag out", err))
		}
	}
	if t.SettleLoad < 0 {
		errs = append(errs, fmt.Errorf("--e2b-settle-load=%v: give a load average to wait for (such as 2), or 0 not to wait", t.SettleLoad))
	}
	if t.APIURL == "" && t.RouterNamespace == "" {
		errs = append(errs, errors.New("--e2b-api-url is empty and so is --router-namespace: give the front door's URL, or the namespace of paddock-router's Pods"))
	}
	if ns, name, ok := strings.Cut(t.Template, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		errs = append(errs, fmt.Errorf("--e2b-template=%q: give namespace/name of a SandboxTemplate that runs sandboxd with envd's port %d, such as default/%s of paddock dev up", t.Template, e2b.EnvdPort, e2b.DefaultTemplate))
	}
	return errors.Join(errs...)
}

// E2B is what an e2b scenario measured through E2B's wire protocol.
type E2B struct {
	APIURL string `json:"apiURL"`
	// Create runs from just before POST /v2/sandboxes to its 201. FirstInstruction runs from the
	// same instant until the first commands.run('true') (envd's Process/Start through the front
	// door's data plane) returned exit code 0.
	Create           Summary `json:"create"`
	FirstInstruction Summary `json:"firstInstruction"`
	// WarmCreate and WarmFirstInstruction are the same for the creates a pool member served
	// (Warm of them, with a successful first command): the claim's critical path, without the
	// creates that waited for a cold start.
	WarmCreate           Summary `json:"warmCreate"`
	WarmFirstInstruction Summary `json:"warmFirstInstruction"`
	// ClaimWritten, Bound and ClaimReady split a create as the harness's watches saw it, from
	// the same instant: the front door's claim create landed; a Sandbox carries the claim's UID
	// (the claim controller's adoption patch, or its cold create); the claim's Ready condition.
	ClaimWritten Summary `json:"claimWritten"`
	Bound        Summary `json:"bound"`
	ClaimReady   Summary `json:"claimReady"`
	// LoadAtCreates is the harness machine's load average (1, 5 and 15 minutes) just before the
	// first create.
	LoadAtCreates string `json:"loadAtCreates,omitempty"`
	// Created is how many creates answered 201; Warm how many of those a pool member served.
	Created int `json:"created"`
	Warm    int `json:"warm"`
	// NodeCPU is where the harness machine's CPU went from just before the first create to the
	// last first command's end, with --e2b-node-cpu.
	NodeCPU *NodeCPU `json:"nodeCPU,omitempty"`
	// Problems are the first failures, one per kind of message.
	Problems []string `json:"problems,omitempty"`
	// Steps split the warm creates further, from the front door's Server-Timing and the first
	// command's events; nil when the front door sent no steps.
	Steps *E2BSteps `json:"steps,omitempty"`
}

// E2BSteps are the steps of the warm creates, each a duration of its own (not since the start).
type E2BSteps struct {
	// RouterClaim, RouterBound and RouterDaemon are the front door's: its claim create; from
	// there until a routable Sandbox was bound to the claim in its cache; from there until the
	// Sandbox's daemon accepted the sandbox token (the claim settings applied). Probe is the
	// accepting probe's round trip; RefusedProbes the mean number of probes refused before it.
	RouterClaim   Summary `json:"routerClaim"`
	RouterBound   Summary `json:"routerBound"`
	RouterDaemon  Summary `json:"routerDaemon"`
	Probe         Summary `json:"probe"`
	RefusedProbes float64 `json:"refusedProbes"`
	// ExecStarted runs from the 201 to the first command's start event (the request through the
	// router, the daemon has started the process); ExecEnded from there to its end event.
	ExecStarted Summary `json:"execStarted"`
	ExecEnded   Summary `json:"execEnded"`
	// SecondInstruction is a second commands.run('true') right after the first, with
	// --e2b-second-command.
	SecondInstruction Summary `json:"secondInstruction"`
}

// e2bSample is one create and its first command.
type e2bSample struct {
	id            string
	start         time.Duration // since the scenario's first create
	create, first time.Duration
	startedAt     time.Time
	// claimWritten, bound and claimReady are since the create's start; 0 when not seen.
	claimWritten, bound, claimReady time.Duration
	// steps are the front door's Server-Timing steps; run the first command's events, since
	// the 201; second the second command, when run.
	steps  serverSteps
	run    runTimes
	second time.Duration
	// warm is set when a pool member served the create; warmKnown when that was read before a
	// kill (KillAfterCommand), which markWarm then keeps.
	warm, warmKnown bool
	createErr       error
	runErr          error
}

// e2bScenario runs one rate of creates: a pool the size of the run, a key, the creates at the
// rate each followed by commands.run('true'), then a kill of every sandbox it made.
func (r *Runner) e2bScenario(ctx context.Context, ns string, s Scenario) (Result, error) {
	log := klog.FromContext(ctx).WithValues("scenario", s.Name(), "namespace", ns)
	t := r.e2bTarget
	url := t.APIURL
	if url == "" {
		var err error
		if url, err = e2baccess.RouterURL(ctx, r.c, t.RouterNamespace, e2b.DefaultPort); err != nil {
			return Result{}, fmt.Errorf("finding the E2B front door: %w", err)
		}
	}
	key := t.APIKey
	if key == "" {
		var secret *corev1.Secret
		var err error
		if key, secret, err = e2baccess.CreateAPIKey(ctx, r.c, t.KeysNamespace, ns); err != nil {
			return Result{}, err
		}
		defer func() {
			if err := r.c.Delete(context.Background(), secret); client.IgnoreNotFound(err) != nil {
				log.Error(err, "Deleting the scenario's API key", "secret", klog.KObj(secret))
			}
		}()
	}
	fd := newE2BClient(url, key, s.Count)
	template := cmp.Or(s.ExistingTemplate, templateName)
	if s.ExistingTemplate == "" {
		if err := r.e2bPool(ctx, ns, s); err != nil {
			return Result{}, err
		}
	}
	if err := fd.waitKnown(ctx, s.Timeout); err != nil {
		return Result{}, err
	}
	if t.SettleLoad > 0 {
		settled, load := settle(ctx, t.SettleLoad, s.Timeout, time.Second, loadAverage1)
		log.Info("Waited for the machine to settle", "settleLoad", t.SettleLoad, "load", load, "settled", settled)
		if !settled {
			log.Info("The load did not settle within the timeout; measuring anyway (the report carries the load)")
		}
	}
	loadAtCreates := loadAverage()
	log.Info("Warm pool is ready and the front door knows the key; creating E2B sandboxes", "url", url, "template", template, "load", loadAtCreates)

	before, err := r.Writes(ctx)
	if err != nil {
		return Result{}, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	phases, err := r.watchPhases(watchCtx, ns)
	if err != nil {
		return Result{}, err
	}
	var cpuBefore cpuSnapshot
	if t.NodeCPU {
		if cpuBefore, err = readCPUSnapshot("/proc"); err != nil {
			return Result{}, fmt.Errorf("--e2b-node-cpu: %w", err)
		}
	}
	samples := r.e2bCreates(ctx, fd, ns, template, s)
	var cpu *NodeCPU
	if t.NodeCPU {
		// The creates are made: a failed read loses the CPU report, not the run (its kills).
		if cpuAfter, err := readCPUSnapshot("/proc"); err != nil {
			log.Error(err, "Reading the node's CPU after the creates; the report has no node CPU")
		} else {
			cpu = nodeCPU(cpuBefore, cpuAfter)
		}
	}
	after, err := r.Writes(ctx)
	phases.fill(samples)
	if err != nil {
		return Result{}, err
	}
	if err := r.markWarm(ctx, ns, samples); err != nil {
		log.Error(err, "Counting the creates a pool member served")
	}
	fd.killAll(ctx, samples)
	res := e2bResult(s, url, samples)
	res.E2B.LoadAtCreates = loadAtCreates
	res.E2B.NodeCPU = cpu
	res.Writes = after.Sub(before)
	res.WritesPerClaim = res.Writes.Total() / float64(s.Count)
	return res, nil
}

// e2bPool makes the scenario's template, a copy of the target's with its volumes dropped (a
// volume per member only slows the pool's fill; a warm create never waits for one), and a pool
// of one member per create, or of the scenario's pool size, with its idle CPU.
func (r *Runner) e2bPool(ctx context.Context, ns string, s Scenario) error {
	srcNS, srcName, _ := strings.Cut(r.e2bTarget.Template, "/")
	src := &extensionsv1beta1.SandboxTemplate{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: srcNS, Name: srcName}, src); err != nil {
		return fmt.Errorf("reading --e2b-template %s (paddock dev up makes default/%s): %w", r.e2bTarget.Template, e2b.DefaultTemplate, err)
	}
	tpl := e2bTemplate(ns, src)
	if err := r.c.Create(ctx, tpl); err != nil {
		return fmt.Errorf("creating SandboxTemplate %s/%s: %w", ns, templateName, err)
	}
	if err := r.c.Create(ctx, e2bPoolObject(ns, s)); err != nil {
		return fmt.Errorf("creating SandboxWarmPool %s/%s: %w", ns, poolName, err)
	}
	return r.waitPoolFull(ctx, ns, s.PoolSize, s.Timeout)
}

// e2bPoolObject is the scenario's pool: PoolSize members, with the scenario's idle CPU.
func e2bPoolObject(ns string, s Scenario) *extensionsv1beta1.SandboxWarmPool {
	pool := newPool(ns, s.PoolSize)
	if s.IdleCPU != "" {
		pool.Annotations = map[string]string{extensionsv1beta1.IdleCPUAnnotation: s.IdleCPU}
	}
	return pool
}

// e2bTemplate is src under the scenario's template name in ns, without volumes.
func e2bTemplate(ns string, src *extensionsv1beta1.SandboxTemplate) *extensionsv1beta1.SandboxTemplate {
	tpl := &extensionsv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: templateName, Namespace: ns, Annotations: src.Annotations},
		Spec:       *src.Spec.DeepCopy(),
	}
	tpl.Spec.VolumeClaimTemplates = nil
	for i := range tpl.Spec.PodTemplate.Spec.Containers {
		tpl.Spec.PodTemplate.Spec.Containers[i].VolumeMounts = nil
	}
	return tpl
}

// e2bCreates sends the creates open-loop on the rate's schedule, each in its own goroutine and
// followed by its first command, and returns once every one of them ended.
func (r *Runner) e2bCreates(ctx context.Context, fd *e2bClient, ns, template string, s Scenario) []e2bSample {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	samples := make([]e2bSample, s.Count)
	metadata := map[string]string{"paddock-bench": ns}
	timeout := int64(max(s.Timeout, 5*time.Minute) / time.Second)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range s.Count {
		if s.Rate > 0 {
			if d := time.Until(t0.Add(time.Duration(float64(i) / s.Rate * float64(time.Second)))); d > 0 {
				timer := time.NewTimer(d)
				select {
				case <-ctx.Done():
					timer.Stop()
					wg.Wait()
					return samples[:i]
				case <-timer.C:
				}
			}
		}
		wg.Go(func() {
			smp := &samples[i]
			start := time.Now()
			smp.start, smp.startedAt = start.Sub(t0), start
			sb, steps, err := fd.createWithSteps(ctx, template, metadata, timeout)
			smp.create = time.Since(start)
			if err != nil {
				smp.createErr = err
				return
			}
			smp.id, smp.steps = sb.SandboxID, steps
			if smp.run, err = fd.runTimed(ctx, sb, "true"); err != nil {
				smp.runErr = err
				return
			}
			smp.first = time.Since(start)
			if r.e2bTarget.SecondCommand {
				if second, err := fd.runTimed(ctx, sb, "true"); err == nil {
					smp.second = second.ended
				}
			}
			if r.e2bTarget.KillAfterCommand {
				r.markWarmAndKill(ctx, fd, ns, smp)
			}
		})
	}
	wg.Wait()
	return samples
}

// markWarmAndKill marks one sample warm when its claim is bound to a Sandbox not named after
// it (an adopted pool member; a cold claim's Sandbox takes the claim's name), then kills the
// sandbox. A failed read leaves the sample cold and is logged; the sandbox is killed anyway.
func (r *Runner) markWarmAndKill(ctx context.Context, fd *e2bClient, ns string, smp *e2bSample) {
	log := klog.FromContext(ctx).WithValues("sandbox", smp.id)
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: smp.id}, claim); err != nil {
		log.Error(err, "Reading the claim of an E2B sandbox before its kill")
	} else if bound := claim.Status.Sandbox.Name; bound != "" {
		smp.warm, smp.warmKnown = bound != smp.id, true
	}
	if _, err := fd.kill(ctx, smp.id); err != nil {
		log.Error(err, "Killing an E2B sandbox after its command")
	}
}

// markWarm marks the samples whose Sandbox is a former pool member: a cold claim's Sandbox is
// named after the claim (the sandbox ID), an adopted member keeps its own name.
func (r *Runner) markWarm(ctx context.Context, ns string, samples []e2bSample) error {
	ids := map[string]bool{}
	for _, smp := range samples {
		if smp.id != "" {
			ids[smp.id] = true
		}
	}
	list := &agentsv1beta1.SandboxList{}
	if err := r.c.List(ctx, list, client.InNamespace(ns), client.HasLabels{agentsv1beta1.ClaimUIDLabel}); err != nil {
		return err
	}
	claims := &extensionsv1beta1.SandboxClaimList{}
	if err := r.c.List(ctx, claims, client.InNamespace(ns)); err != nil {
		return err
	}
	byUID := map[string]string{}
	for _, c := range claims.Items {
		byUID[string(c.UID)] = c.Name
	}
	warm := map[string]bool{}
	for _, sb := range list.Items {
		claim := byUID[sb.Labels[agentsv1beta1.ClaimUIDLabel]]
		if ids[claim] && sb.Name != claim {
			warm[claim] = true
		}
	}
	for i := range samples {
		if !samples[i].warmKnown {
			samples[i].warm = warm[samples[i].id]
		}
	}
	return nil
}

// e2bResult summarizes the samples. A sample counts as Ready when its first command succeeded.
func e2bResult(s Scenario, url string, samples []e2bSample) Result {
	res := Result{Name: s.Name(), Kind: s.Kind, Count: s.Count, Rate: s.Rate, PoolSize: s.PoolSize, Writes: Writes{}}
	m := &E2B{APIURL: url}
	var creates, firsts, written, bound, ready, warmCreates, warmFirsts []float64
	var last time.Duration
	seen := map[string]bool{}
	problem := func(err error) {
		msg := err.Error()
		if !seen[msg] && len(m.Problems) < 5 {
			seen[msg] = true
			m.Problems = append(m.Problems, msg)
		}
	}
	for i, smp := range samples {
		out := Sample{Name: smp.id, StartSeconds: smp.start.Seconds(), LatencySeconds: smp.create.Seconds(), Warm: smp.createErr == nil && smp.warm}
		if smp.createErr == nil && smp.warm {
			m.Warm++
		}
		if out.Name == "" {
			out.Name = objectName("create", i)
		}
		switch {
		case smp.createErr != nil:
			out.Error = "create: " + smp.createErr.Error()
			res.Failed++
			problem(fmt.Errorf("create: %w", smp.createErr))
		case smp.runErr != nil:
			m.Created++
			creates = append(creates, smp.create.Seconds())
			out.Error = "commands.run: " + smp.runErr.Error()
			problem(fmt.Errorf("commands.run('true'): %w", smp.runErr))
		default:
			m.Created++
			creates = append(creates, smp.create.Seconds())
			firsts = append(firsts, smp.first.Seconds())
			if smp.warm {
				warmCreates = append(warmCreates, smp.create.Seconds())
				warmFirsts = append(warmFirsts, smp.first.Seconds())
			}
			for _, p := range []struct {
				d   time.Duration
				out *[]float64
			}{{smp.claimWritten, &written}, {smp.bound, &bound}, {smp.claimReady, &ready}} {
				if p.d > 0 {
					*p.out = append(*p.out, p.d.Seconds())
				}
			}
			out.Ready = true
			res.Ready++
			last = max(last, smp.start+smp.first)
		}
		res.Samples = append(res.Samples, out)
	}
	sort.Slice(res.Samples, func(i, j int) bool { return res.Samples[i].StartSeconds < res.Samples[j].StartSeconds })
	m.Create, m.FirstInstruction = Summarize(creates), Summarize(firsts)
	m.WarmCreate, m.WarmFirstInstruction = Summarize(warmCreates), Summarize(warmFirsts)
	m.ClaimWritten, m.Bound, m.ClaimReady = Summarize(written), Summarize(bound), Summarize(ready)
	m.Steps = e2bSteps(samples)
	res.Latency = m.Create
	if res.Ready > 0 {
		res.AllReadySeconds = last.Seconds()
	}
	res.E2B = m
	return res
}

// e2bSteps summarizes the steps of the warm creates whose first command succeeded; nil when
// none carried the front door's steps.
func e2bSteps(samples []e2bSample) *E2BSteps {
	var claim, bound, daemon, probe, started, ended, second []float64
	refused := 0.0
	for _, smp := range samples {
		if !smp.warm || smp.createErr != nil || smp.runErr != nil || smp.steps["daemon"] == 0 {
			continue
		}
		for name, out := range map[string]*[]float64{"claim": &claim, "bound": &bound, "daemon": &daemon, "probe": &probe} {
			*out = append(*out, smp.steps[name].Seconds())
		}
		refused += float64(smp.steps[refusedStep])
		started = append(started, smp.run.started.Seconds())
		ended = append(ended, (smp.run.ended - smp.run.started).Seconds())
		if smp.second > 0 {
			second = append(second, smp.second.Seconds())
		}
	}
	if len(claim) == 0 {
		return nil
	}
	return &E2BSteps{RouterClaim: Summarize(claim), RouterBound: Summarize(bound), RouterDaemon: Summarize(daemon), Probe: Summarize(probe),
		RefusedProbes: refused / float64(len(claim)), ExecStarted: Summarize(started), ExecEnded: Summarize(ended), SecondInstruction: Summarize(second)}
}

// e2bTable renders the e2b scenarios against the targets.
func e2bTable(results []Result) string {
	var b strings.Builder
	for _, s := range results {
		m := s.E2B
		if m == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n| e2b scenario | 201 | warm | create p50 | create p99 | first instruction p50 | first instruction p99 | API writes per create | load at creates / end |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
		}
		fmt.Fprintf(&b, "| %s | %d of %d | %d | %s | %s | %s | %s | %.1f | %s / %s |\n", s.Name, m.Created, s.Count, m.Warm,
			microseconds(m.Create.P50), microseconds(m.Create.P99), microseconds(m.FirstInstruction.P50), microseconds(m.FirstInstruction.P99), s.WritesPerClaim,
			orDash(m.LoadAtCreates), orDash(s.LoadAverage))
	}
	if b.Len() == 0 {
		return ""
	}
	b.WriteString("\n| e2b scenario, p50 (p99) from the create's start | claim written | Sandbox bound | claim Ready | 201 | first instruction | 201, warm only | first instruction, warm only |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, s := range results {
		if m := s.E2B; m != nil {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Name, phase(m.ClaimWritten), phase(m.Bound), phase(m.ClaimReady), phase(m.Create), phase(m.FirstInstruction),
				phase(m.WarmCreate), phase(m.WarmFirstInstruction))
		}
	}
	writeStepsTable(&b, results)
	writeNodeCPUTable(&b, results)
	fmt.Fprintf(&b, "\nTargets at 20/s on 2 cores: create p50 ≤ %s and p99 ≤ %s; time to first instruction p50 ≤ %s.\n",
		latency(1, e2bTargetCreateP50), latency(1, e2bTargetCreateP99), latency(1, e2bTargetFirstP50))
	for _, s := range results {
		if s.E2B != nil && len(s.E2B.Problems) > 0 {
			fmt.Fprintf(&b, "\n%s: %s.\n", s.Name, strings.Join(s.E2B.Problems, "; "))
		}
	}
	b.WriteString("\nThe harness speaks E2B's wire protocol as the e2b SDK 2.51.0 does (POST /v2/sandboxes with X-API-Key; commands.run as envd's Connect-JSON Process/Start through the front door with E2b-Sandbox-Id, E2b-Sandbox-Port and X-Access-Token), from the machine it runs on, with keep-alive connections. Create runs from just before the POST to its 201; first instruction from the same instant until `true` has exited. API writes are the API server's, cluster-wide, from the first create to the last first instruction.\n")
	return b.String()
}

// writeStepsTable renders the warm creates' steps of the scenarios that have them.
func writeStepsTable(b *strings.Builder, results []Result) {
	header := false
	for _, s := range results {
		st := s.E2B.stepsOrNil()
		if st == nil {
			continue
		}
		if !header {
			b.WriteString("\n| e2b scenario, warm creates, p50 (p99) of each step | front door: claim create | claim to bound | bound to daemon accepting | refused probes (mean) | accepting probe | 201 to exec start | exec start to exit | second command |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
			header = true
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %.2f | %s | %s | %s | %s |\n", s.Name, phase(st.RouterClaim), phase(st.RouterBound), phase(st.RouterDaemon),
			st.RefusedProbes, phase(st.Probe), phase(st.ExecStarted), phase(st.ExecEnded), phase(st.SecondInstruction))
	}
}

// writeNodeCPUTable renders where the node's CPU went, per create, for the scenarios that read it.
func writeNodeCPUTable(b *strings.Builder, results []Result) {
	header := false
	for _, s := range results {
		if s.E2B == nil || s.E2B.NodeCPU == nil {
			continue
		}
		if !header {
			b.WriteString("\n| e2b scenario | node CPU from the first create to the last first command, ms per create |\n|---|---|\n")
			header = true
		}
		fmt.Fprintf(b, "| %s | %s (window %.1f s, %.2f cores busy) |\n", s.Name, s.E2B.NodeCPU.perUnit(s.Count),
			s.E2B.NodeCPU.Seconds, s.E2B.NodeCPU.Busy/max(s.E2B.NodeCPU.Seconds, 1e-9))
	}
}

func (m *E2B) stepsOrNil() *E2BSteps {
	if m == nil {
		return nil
	}
	return m.Steps
}

// phase renders a summary's p50 and p99.
func phase(s Summary) string {
	if s.N == 0 {
		return "–"
	}
	return microseconds(s.P50) + " (" + microseconds(s.P99) + ")"
}

// phaseWatch records when the harness's watches saw each claim written, bound and Ready.
type phaseWatch struct {
	mu      sync.Mutex
	written map[string]time.Time // by claim name
	ready   map[string]time.Time // by claim name
	names   map[string]string    // claim UID -> name
	bound   map[string]time.Time // by claim UID
}

// watchPhases watches the namespace's claims and Sandboxes until ctx ends.
func (r *Runner) watchPhases(ctx context.Context, ns string) (*phaseWatch, error) {
	p := &phaseWatch{written: map[string]time.Time{}, ready: map[string]time.Time{}, names: map[string]string{}, bound: map[string]time.Time{}}
	first := func(m map[string]time.Time, k string, at time.Time) {
		if _, ok := m[k]; !ok {
			m[k] = at
		}
	}
	err := watchEach(ctx, r.c, &extensionsv1beta1.SandboxClaimList{}, ns, func(obj client.Object, at time.Time) {
		c := obj.(*extensionsv1beta1.SandboxClaim)
		p.mu.Lock()
		defer p.mu.Unlock()
		first(p.written, c.Name, at)
		p.names[string(c.UID)] = c.Name
		if meta.IsStatusConditionTrue(c.Status.Conditions, readyCondition) {
			first(p.ready, c.Name, at)
		}
	})
	if err != nil {
		return nil, err
	}
	err = watchEach(ctx, r.c, &agentsv1beta1.SandboxList{}, ns, func(obj client.Object, at time.Time) {
		if uid := obj.GetLabels()[agentsv1beta1.ClaimUIDLabel]; uid != "" {
			p.mu.Lock()
			defer p.mu.Unlock()
			first(p.bound, uid, at)
		}
	})
	return p, err
}

// fill sets each sample's phases from what the watches saw.
func (p *phaseWatch) fill(samples []e2bSample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	uids := map[string]string{}
	for uid, name := range p.names {
		uids[name] = uid
	}
	for i := range samples {
		smp := &samples[i]
		if smp.id == "" {
			continue
		}
		since := func(at time.Time, ok bool) time.Duration {
			if !ok {
				return 0
			}
			return at.Sub(smp.startedAt)
		}
		at, ok := p.written[smp.id]
		smp.claimWritten = since(at, ok)
		at, ok = p.bound[uids[smp.id]]
		smp.bound = since(at, ok)
		at, ok = p.ready[smp.id]
		smp.claimReady = since(at, ok)
	}
}

// waitKnown polls the list endpoint until the front door accepts the key: it learns of a new
// key Secret through its watch, a moment after the Secret is written.
func (c *e2bClient) waitKnown(ctx context.Context, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		last = c.list(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the E2B front door at %s did not accept the scenario's API key within %s (is the router's E2B listener on, with --e2b-api-key-namespace as given?): %w", c.url, timeout, errors.Join(last, err))
	}
	return nil
}

// settle polls load every interval until it is at most limit, for at most timeout, and returns
// whether it got there and the last load seen (-1 where the load cannot be read: no wait).
func settle(ctx context.Context, limit float64, timeout, every time.Duration, load func() (float64, bool)) (bool, float64) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		l, ok := load()
		switch {
		case !ok:
			return false, -1
		case l <= limit:
			return true, l
		case !time.Now().Before(deadline):
			return false, l
		}
		select {
		case <-ctx.Done():
			return false, l
		case <-tick.C:
		}
	}
}

// loadAverage1 is the harness machine's 1-minute load average (Linux).
func loadAverage1() (float64, bool) {
	f := strings.Fields(loadAverage())
	if len(f) == 0 {
		return 0, false
	}
	l, err := strconv.ParseFloat(f[0], 64)
	return l, err == nil
}
