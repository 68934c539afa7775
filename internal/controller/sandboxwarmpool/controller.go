package sandboxwarmpool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/autosize"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/warmpool"
)

// Options configure the controller. Defaults match the reference's flag defaults.
type Options struct {
	// Workers is --sandbox-warm-pool-concurrent-workers (default 1).
	Workers int
	// MaxBatchSize caps creates and deletes per pass: --sandbox-warm-pool-max-batch-size (300).
	MaxBatchSize int
	// ReadinessGracePeriod is --sandbox-warm-pool-readiness-grace-period (5m).
	ReadinessGracePeriod time.Duration
	// UnschedulableRecheckInterval is --sandbox-warm-pool-unschedulable-recheck-interval (1m).
	UnschedulableRecheckInterval time.Duration
	// SafeToEvict is --enable-warm-pool-eviction (true).
	SafeToEvict bool
	// ReplenishDelay is --sandbox-warm-pool-replenish-delay (0, refill at once).
	ReplenishDelay time.Duration
	// MaxRefillRate is --sandbox-warm-pool-max-refill-rate in Sandboxes per second (0, unpaced).
	MaxRefillRate float64
	// MaxStarting is --sandbox-warm-pool-max-starting: most members of one pool starting at once
	// while the pool has Ready members to spare (0, no cap; warmpool.Input.MaxStarting).
	MaxStarting int
	// AutosizeRateWindow is how far back an autosized pool counts the claims of its members
	// (1m; docs/design/autosize.md).
	AutosizeRateWindow time.Duration
	// AutosizeStabilizationWindow is how long the demand of an autosized pool must stay lower
	// before the pool shrinks (5m).
	AutosizeStabilizationWindow time.Duration
	// Clock is the clock; the real clock when nil.
	Clock clock.PassiveClock
}

// DefaultOptions returns the reference's defaults.
func DefaultOptions() Options {
	return Options{Workers: 1, MaxBatchSize: 300, ReadinessGracePeriod: 5 * time.Minute,
		UnschedulableRecheckInterval: time.Minute, SafeToEvict: true,
		AutosizeRateWindow: time.Minute, AutosizeStabilizationWindow: 5 * time.Minute, Clock: clock.RealClock{}}
}

// statusCountsInterval is the least time between two status writes of a pool that only move its
// replica counts (see warmpool.StatusPacer).
const statusCountsInterval = time.Second

// expectationsRecheck is how soon a pool blocked on unobserved writes looks again, in case the
// watch event that would wake it was lost.
const expectationsRecheck = 30 * time.Second

// takenRecheck is how soon a pool whose delete was refused because the member changed looks
// again. The member's own watch event usually wakes it first.
const takenRecheck = time.Second

// Reconciler reconciles SandboxWarmPools.
type Reconciler struct {
	client       client.Client
	recorder     events.EventRecorder
	opts         Options
	expectations *warmpool.Expectations
	shaping      *warmpool.Shaping
	statusPacer  *warmpool.StatusPacer
	// terminating holds member creates in namespaces that are being deleted.
	terminating *kube.TerminatingNamespaces
	// demand is what the member watch saw of each pool's claims and start-up times.
	demand *autosize.Demand

	mu             sync.Mutex
	notProgressing map[string]bool   // pools currently holding unschedulable members
	scaledFrom     map[string]string // pool -> resourceVersion its last unobserved scale write started from
}

// New returns a Reconciler that reads and writes through c (normally the manager's cached
// client) and emits events with recorder (none when nil). Start from DefaultOptions: New fills
// only the zero fields whose zero means nothing (workers, batch size, grace and recheck periods,
// autosize windows, clock; not SafeToEvict, whose zero is false); a negative one is an error
// naming it.
func New(c client.Client, recorder events.EventRecorder, opts Options) (*Reconciler, error) {
	if err := kube.CheckClient("sandbox warm pool", c); err != nil {
		return nil, err
	}
	if err := checkOptions(opts); err != nil {
		return nil, err
	}
	def := DefaultOptions()
	opts.Workers = cmp.Or(opts.Workers, def.Workers)
	opts.MaxBatchSize = cmp.Or(opts.MaxBatchSize, def.MaxBatchSize)
	opts.ReadinessGracePeriod = cmp.Or(opts.ReadinessGracePeriod, def.ReadinessGracePeriod)
	opts.UnschedulableRecheckInterval = cmp.Or(opts.UnschedulableRecheckInterval, def.UnschedulableRecheckInterval)
	opts.AutosizeRateWindow = cmp.Or(opts.AutosizeRateWindow, def.AutosizeRateWindow)
	opts.AutosizeStabilizationWindow = cmp.Or(opts.AutosizeStabilizationWindow, def.AutosizeStabilizationWindow)
	if opts.Clock == nil {
		opts.Clock = def.Clock
	}
	return &Reconciler{client: c, recorder: kube.Recorder(recorder), opts: opts,
		expectations: warmpool.NewExpectations(opts.Clock.Now), notProgressing: map[string]bool{}, scaledFrom: map[string]string{},
		demand:      autosize.NewDemand(opts.AutosizeRateWindow, opts.AutosizeStabilizationWindow),
		shaping:     &warmpool.Shaping{ReplenishDelay: opts.ReplenishDelay, MaxRefillRate: opts.MaxRefillRate},
		statusPacer: &warmpool.StatusPacer{Interval: statusCountsInterval},
		terminating: kube.NewTerminatingNamespaces(opts.Clock)}, nil
}

// checkOptions names every negative option.
func checkOptions(o Options) error {
	var errs []error
	negative := func(name string, v any) {
		errs = append(errs, fmt.Errorf("sandbox warm pool reconciler option %s is %v; set 0 for its default or a positive value", name, v))
	}
	if o.Workers < 0 {
		negative("Workers", o.Workers)
	}
	if o.MaxBatchSize < 0 {
		negative("MaxBatchSize", o.MaxBatchSize)
	}
	if o.ReadinessGracePeriod < 0 {
		negative("ReadinessGracePeriod", o.ReadinessGracePeriod)
	}
	if o.UnschedulableRecheckInterval < 0 {
		negative("UnschedulableRecheckInterval", o.UnschedulableRecheckInterval)
	}
	if o.ReplenishDelay < 0 {
		negative("ReplenishDelay", o.ReplenishDelay)
	}
	if o.MaxRefillRate < 0 {
		negative("MaxRefillRate", o.MaxRefillRate)
	}
	if o.MaxStarting < 0 {
		negative("MaxStarting", o.MaxStarting)
	}
	if o.AutosizeRateWindow < 0 {
		negative("AutosizeRateWindow", o.AutosizeRateWindow)
	}
	if o.AutosizeStabilizationWindow < 0 {
		negative("AutosizeStabilizationWindow", o.AutosizeStabilizationWindow)
	}
	return errors.Join(errs...)
}

// Reconcile brings one pool to its desired number of fresh members and reports its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	key := req.String()
	pool := &extensionsv1beta1.SandboxWarmPool{}
	if err := r.client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !pool.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	now := r.opts.Clock.Now()
	sized, resize := r.autosize(ctx, pool, now)
	tpl, tplErr := r.getTemplate(ctx, pool)
	members, err := r.listMembers(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.expectations.Listed(key, memberUIDs(members))
	plan := warmpool.Make(observeMembers(pool, tpl, members, r.expectations.DeletePending), warmpool.Input{
		Desired:               desiredReplicas(pool),
		MaxBatch:              r.opts.MaxBatchSize,
		Recreate:              recreate(pool),
		TemplateKnown:         tpl != nil,
		ExpectationsSatisfied: r.expectations.Satisfied(key),
		Grace:                 r.opts.ReadinessGracePeriod,
		MaxStarting:           r.opts.MaxStarting,
		Now:                   now,
	})
	log.V(4).Info("Warm pool plan", "pool", klog.KObj(pool), "members", len(members), "create", plan.Create,
		"delete", len(plan.Delete), "adopt", len(plan.Adopt), "replicas", plan.Replicas, "ready", plan.ReadyReplicas,
		"starting", plan.Starting, "heldStarting", plan.HeldStarting, "capLifted", plan.CapLifted)

	create, paced := r.shaping.Allow(key, plan.Create, int(plan.Replicas), now)
	blocked, blockErr := r.creationBlocker(ctx, pool, tpl)
	if blocked.reason != "" {
		create = 0
		// The cause may be fixed without an event we watch; a namespace being deleted is not.
		paced = sooner(paced, cmp.Or(r.terminating.Held(pool.Namespace), r.opts.UnschedulableRecheckInterval))
	}
	taken, delErr := r.deleteMembers(ctx, pool, plan.Delete)
	if taken > 0 {
		// The plan's view of those members is out of date: look again once the cache has caught up.
		paced = sooner(paced, takenRecheck)
	}
	created, createErr := r.createMembers(ctx, pool, tpl, create)
	r.terminating.Observe(pool.Namespace, createErr)
	// The members created this pass exist: counting them now spares the status a write that
	// would only say so once the watch shows them (one less pool status write per refill).
	plan.Replicas += int32(created)
	made := createOutcome(create, createErr)
	if blocked.reason != "" {
		made = blocked
	}
	actErr := errors.Join(
		sized.writeErr,
		delErr,
		blockErr,
		r.adoptOrphans(ctx, pool, members, plan.Adopt),
		r.relabel(ctx, members, plan.Relabel),
		// Members the API server refuses as invalid were built from the template: not retried
		// until the pool or its template changes, which the watches bring.
		kube.RefusedAsInvalid(createErr),
	)

	original := pool.DeepCopy()
	setConditions(pool, tpl != nil, tplErr, made, plan)
	setAutosizeCondition(pool, sized)
	statusWait, err := r.writeStatus(ctx, key, pool, original, plan, now)
	actErr = errors.Join(actErr, err)
	if err == nil {
		r.conditionEvents(pool, original.Status.Conditions)
	}
	r.reportProgress(pool, plan)
	return kube.Result(ctx, r.requeue(key, plan, sooner(sooner(paced, statusWait), resize), now), errors.Join(actErr, tplErr))
}

// writeStatus writes the pool's status from plan, unless it only moves the replica counts and
// the last write was too recent: then it returns how long to wait before writing.
func (r *Reconciler) writeStatus(ctx context.Context, key string, pool, original *extensionsv1beta1.SandboxWarmPool, plan warmpool.Plan, now time.Time) (time.Duration, error) {
	setStatus(pool, plan)
	if wait := r.statusPacer.Wait(key, countsOnly(original.Status, pool.Status), now); wait > 0 {
		return wait, nil
	}
	written, err := kube.PatchStatus(ctx, r.client, pool, original, poolStatus)
	if written {
		r.statusPacer.Wrote(key, now)
	}
	return 0, err
}

// sooner returns the earlier of two requeue delays, where 0 means none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// requeue is when the pool must look again without an event: when a young member's grace
// period ends, when paced creates may go, while members are held unschedulable, or while writes
// are unobserved.
func (r *Reconciler) requeue(key string, plan warmpool.Plan, paced time.Duration, now time.Time) ctrl.Result {
	after := paced
	if !plan.RecheckAt.IsZero() {
		wait := plan.RecheckAt.Sub(now) + 2*time.Second
		wait += time.Duration(rand.Int64N(int64(wait)/2 + 1)) // jitter spreads the rechecks of many pools
		if after == 0 || wait < after {
			after = wait
		}
	}
	if plan.Unschedulable > 0 && (after == 0 || r.opts.UnschedulableRecheckInterval < after) {
		after = r.opts.UnschedulableRecheckInterval
	}
	if !r.expectations.Satisfied(key) && (after == 0 || expectationsRecheck < after) {
		after = expectationsRecheck
	}
	return ctrl.Result{RequeueAfter: after}
}

func (r *Reconciler) forget(pool types.NamespacedName) {
	key := pool.String()
	forgetAutosizeMetrics(pool.Namespace, pool.Name)
	r.expectations.Forget(key)
	r.shaping.Forget(key)
	r.statusPacer.Forget(key)
	r.demand.Forget(key)
	r.mu.Lock()
	delete(r.notProgressing, key)
	delete(r.scaledFrom, key)
	r.mu.Unlock()
}

// SetupWithManager registers the controller. The cache indexes of package indexes must be
// registered on mgr first.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&extensionsv1beta1.SandboxWarmPool{}).
		Watches(&agentsv1beta1.Sandbox{}, r.memberEvents()).
		Watches(&extensionsv1beta1.SandboxClaim{}, r.claimEvents()).
		Watches(&extensionsv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfTemplate)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.Workers}).
		Named("sandboxwarmpool").
		Complete(r)
}
