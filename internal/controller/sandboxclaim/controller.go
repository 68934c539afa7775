package sandboxclaim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/sandboxdclient"
	"github.com/paddock-dev/paddock/internal/warmqueue"
)

// Options configure the controller. Defaults match the reference's flag defaults.
type Options struct {
	// Workers is --sandbox-claim-concurrent-workers (default DefaultWorkers).
	Workers int
	// AllowedLabelDomains are the domains additionalPodMetadata labels may use (the reference's
	// /etc/sandbox-config/allowed-label-domains); blueprint.DefaultAllowedLabelDomains when empty.
	AllowedLabelDomains []string
	// Clock is the clock; the real clock when nil.
	Clock clock.PassiveClock
	// APIReader is the uncached reader (the manager's GetAPIReader) that resolves what the cache
	// cannot show yet: a Sandbox this controller just created or adopted; the client when nil.
	APIReader client.Reader
	// Queue is the in-memory queue of adoptable warm members, kept by this controller's watch
	// (setup.go); a new, empty one when nil.
	Queue *warmqueue.Queues
	// ClaimSettings configure binding warm sandboxd Sandboxes to their claims (claimsettings.go).
	ClaimSettings ClaimSettingsOptions
	// ResizeGiveUpAfter is how long a claim waits for its warm Sandbox's in-place resize (one the
	// node defers, or that is still in progress) before it discards the Sandbox and starts a cold
	// one (resize.go); DefaultResizeGiveUpAfter when zero. An Infeasible resize falls back at once.
	ResizeGiveUpAfter time.Duration
	// CredentialsKey derives each Sandbox's control token (internal/credentials), with which the
	// controller binds a warm sandboxd member to its claim; nil (--sandbox-credentials=false)
	// serves claims with env cold and cannot unlock locked members.
	CredentialsKey []byte
	// TracerProvider traces each pass and carries the trace to the claim's Sandbox (tracing.go);
	// nil, the default, traces nothing.
	TracerProvider trace.TracerProvider
	// ObservabilityAnnotations writes the claim annotations agents.x-k8s.io/sandbox-name and
	// agents.x-k8s.io/controller-first-observed-at once the claim is Ready, in a patch of their
	// own (record.go); off by default, since it is one more write per claim.
	ObservabilityAnnotations bool
}

// DefaultWorkers is the reference's --sandbox-claim-concurrent-workers default.
const DefaultWorkers = 50

// DefaultOptions returns the defaults New applies to zero options.
func DefaultOptions() Options {
	return Options{Workers: DefaultWorkers, Clock: clock.RealClock{}, ResizeGiveUpAfter: DefaultResizeGiveUpAfter}
}

// Requeue intervals.
const (
	missingRefRequeue   = time.Minute
	createPendingRetry  = 200 * time.Millisecond
	expiryMarkedRequeue = time.Millisecond
	maxAdoptionAttempts = 5
	// A claim waits this long, from its creation, for a warm member that has no IP yet.
	warmCandidateGrace = 2 * time.Second
	warmCandidateRetry = 500 * time.Millisecond
)

// Reconciler reconciles SandboxClaims.
type Reconciler struct {
	client   client.Client
	reader   client.Reader // uncached, to resolve what the cache cannot yet show
	recorder events.EventRecorder
	queue    *warmqueue.Queues
	opts     Options

	// sandboxd binds warm sandboxd members to their claims (claimsettings.go).
	sandboxd *sandboxdclient.Client
	// memory is what this process remembers of each claim between passes.
	memory memories
}

// claimMemory is what this process knows of one claim that its cache may not show yet, or never
// holds. Only the pass holding the claim's key touches it (controller-runtime runs one pass per
// key at a time); forget drops it when the claim goes.
type claimMemory struct {
	// firstSeen is when this process first saw the claim, for the latency metrics and the
	// first-observed annotation.
	firstSeen time.Time
	// binding is a binding this process made, until the cache shows it (bind.go).
	binding *binding
	// lastWrite is the last status this process wrote, so that a pass on a cache that has not
	// caught up with it does not write the same status again.
	lastWrite *statusWrite
	// failingSince is when the current run of failed claim-settings deliveries began; zero when
	// the last one did not fail (claimsettings.go).
	failingSince time.Time
	// delivered marks a claim whose settings sandboxd has, so that a pass on a cache without the
	// SettingsDelivered condition does not send them again.
	delivered bool
	// fellBack is the SettingsFailed condition of a claim that gave up on its warm Sandbox, so
	// that a pass on a cache without it neither tries warm again nor drops it.
	fellBack *metav1.Condition
	// resizeWaitingSince is when the claim's warm Sandbox first reported on its in-place resize
	// (the Sandbox controller sent it, or could not); zero when it is not waiting (resize.go).
	resizeWaitingSince time.Time
	// resized marks a claim whose warm Sandbox was resized, so that it is not waited for again.
	resized bool
	// resizeFellBack is the ResizeFellBack condition of a claim that gave up on its warm Sandbox
	// because the node could not resize it, kept like fellBack.
	resizeFellBack *metav1.Condition
}

// memories holds each claim's memory by UID.
type memories struct{ byUID sync.Map }

// of returns the claim's memory, empty the first time.
func (m *memories) of(uid types.UID) *claimMemory {
	if v, ok := m.byUID.Load(uid); ok {
		return v.(*claimMemory)
	}
	v, _ := m.byUID.LoadOrStore(uid, &claimMemory{})
	return v.(*claimMemory)
}

// forget drops everything this process remembers of a claim.
func (m *memories) forget(uid types.UID) { m.byUID.Delete(uid) }

const bindingUnknown = ""

// New returns a Reconciler that reads and writes through c (normally the manager's cached
// client) and emits events with recorder (none when nil: --disable-claim-events). Start from
// DefaultOptions: New fills only the zero fields whose zero means nothing (workers, clock,
// reader, queue); a negative one is an error naming it.
func New(c client.Client, recorder events.EventRecorder, opts Options) (*Reconciler, error) {
	if err := kube.CheckClient("sandbox claim", c); err != nil {
		return nil, err
	}
	if opts.Workers < 0 {
		return nil, fmt.Errorf("sandbox claim reconciler option Workers is %d; set at least 1", opts.Workers)
	}
	def := DefaultOptions()
	opts.Workers = cmp.Or(opts.Workers, def.Workers)
	if opts.Clock == nil {
		opts.Clock = def.Clock
	}
	opts.APIReader = cmp.Or[client.Reader](opts.APIReader, c)
	if opts.Queue == nil {
		opts.Queue = warmqueue.New()
	}
	if opts.ResizeGiveUpAfter <= 0 {
		opts.ResizeGiveUpAfter = DefaultResizeGiveUpAfter
	}
	if opts.ClaimSettings.GiveUpAfter <= 0 {
		opts.ClaimSettings.GiveUpAfter = defaultSettingsGiveUp
	}
	return &Reconciler{client: c, reader: opts.APIReader, recorder: kube.Recorder(recorder), queue: opts.Queue, opts: opts,
		sandboxd: sandboxdclient.New(sandboxdclient.Options{Key: opts.CredentialsKey,
			Address: opts.ClaimSettings.Address, HTTPClient: opts.ClaimSettings.Client})}, nil
}

// Reconcile binds a claim to a Sandbox, mirrors the Sandbox into the claim's status and enforces
// the claim's lifecycle.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := r.client.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.deleteLegacyPolicy(ctx, claim)
	if !claim.DeletionTimestamp.IsZero() {
		r.memory.forget(claim.UID)
		return ctrl.Result{}, nil
	}
	r.observe(claim)
	ctx, span := r.startSpan(ctx, claim)
	defer span.End()

	now := r.opts.Clock.Now()
	if at, ok := expiresAt(claim); ok && !now.Before(at) {
		return r.expire(ctx, claim)
	}

	sb, launch, bindErr := r.bind(ctx, claim)
	sb, bindErr = r.deliverClaimSettings(ctx, claim, sb, bindErr) // claim settings; a no-op unless warm sandboxd
	sb, bindErr = r.awaitResize(ctx, claim, sb, bindErr)          // in-place resize; a no-op unless warm and resized
	if wait := (*warmWait)(nil); errors.As(bindErr, &wait) {
		return ctrl.Result{RequeueAfter: wait.retryAfter}, nil
	}

	r.recallFallback(claim)
	original := claim.DeepCopy()
	setStatus(claim, sb, bindErr)
	written, err := r.writeStatus(ctx, original, claim)
	if err != nil {
		return ctrl.Result{}, errors.Join(bindErr, err)
	}
	r.recordBinding(ctx, claim, sb, launch)
	if written {
		r.recordReady(claim, original, sb)
	}
	if err := r.annotateObservability(ctx, claim, sb); err != nil {
		return ctrl.Result{}, err
	}
	return r.result(ctx, claim, bindErr, now)
}

// result turns the pass's outcome into a requeue: at expiry, after a minute for a missing pool
// or template, soon for cache lag; backoff only for errors a retry can fix.
func (r *Reconciler) result(ctx context.Context, claim *extensionsv1beta1.SandboxClaim, bindErr error, now time.Time) (ctrl.Result, error) {
	var res ctrl.Result
	if at, ok := expiresAt(claim); ok {
		res.RequeueAfter = max(at.Sub(now), expiryMarkedRequeue)
	}
	after := func(d time.Duration) {
		if res.RequeueAfter == 0 || d < res.RequeueAfter {
			res.RequeueAfter = d
		}
	}
	switch {
	case bindErr == nil:
		return res, nil
	case errors.Is(bindErr, errWarmPoolNotFound), errors.Is(bindErr, errTemplateNotFound):
		after(missingRefRequeue)
		return res, nil
	case errors.Is(bindErr, errCreatePending):
		after(createPendingRetry)
		return res, nil
	case errors.As(bindErr, new(*resizeError)):
		// The Sandbox's resize brings the next pass; this one only bounds the wait.
		var re *resizeError
		errors.As(bindErr, &re)
		after(re.giveUpIn)
		return res, nil
	case suppressed(bindErr):
		// A user error: in the claim's status, not retried; the claim's watch brings the fix.
		return kube.Result(ctx, res, reconcile.TerminalError(bindErr))
	default:
		return ctrl.Result{}, bindErr
	}
}

func (r *Reconciler) observe(claim *extensionsv1beta1.SandboxClaim) {
	if mem := r.memory.of(claim.UID); mem.firstSeen.IsZero() {
		mem.firstSeen = r.opts.Clock.Now()
	}
}

// recallFallback puts back the SettingsFailed condition this process wrote when the claim as read
// from the cache does not show it yet: the status written from this view must keep it.
func (r *Reconciler) recallFallback(claim *extensionsv1beta1.SandboxClaim) {
	if fellBack := r.memory.of(claim.UID).fellBack; fellBack != nil && !fallbackRecorded(claim) {
		meta.SetStatusCondition(&claim.Status.Conditions, *fellBack)
	}
	if fellBack := r.memory.of(claim.UID).resizeFellBack; fellBack != nil && !resizeFallbackRecorded(claim) {
		meta.SetStatusCondition(&claim.Status.Conditions, *fellBack)
	}
}

// writeStatus writes the claim's status when it changed, unless this process wrote the same
// status from the same stale view already. It reports whether a write was sent.
func (r *Reconciler) writeStatus(ctx context.Context, original, claim *extensionsv1beta1.SandboxClaim) (bool, error) {
	if r.echoOfLastWrite(original, claim) {
		return false, nil
	}
	written, err := kube.PatchStatus(ctx, r.client, claim, original, claimStatus)
	if written {
		r.memory.of(claim.UID).lastWrite = &statusWrite{before: original.ResourceVersion, status: *claim.Status.DeepCopy()}
	}
	return written, err
}

type statusWrite struct {
	before string // resourceVersion the write was computed from
	status extensionsv1beta1.SandboxClaimStatus
}

// echoOfLastWrite reports whether the pass computed, from the same stale view of the claim, the
// status this process already wrote: the write happened, the cache just does not show it yet.
func (r *Reconciler) echoOfLastWrite(original, claim *extensionsv1beta1.SandboxClaim) bool {
	last := r.memory.of(claim.UID).lastWrite
	return last != nil && last.before == original.ResourceVersion && sameStatus(last.status, claim.Status)
}

// sameStatus compares statuses ignoring condition transition times, which a pass on a stale
// view sets afresh.
func sameStatus(a, b extensionsv1beta1.SandboxClaimStatus) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	for _, cs := range [][]metav1.Condition{a.Conditions, b.Conditions} {
		for i := range cs {
			cs[i].LastTransitionTime = metav1.Time{}
		}
	}
	return equality.Semantic.DeepEqual(a, b)
}

// getSandbox reads a Sandbox from the cache, falling back to the API server when the cache does
// not have it yet. It returns nil when the Sandbox does not exist.
func (r *Reconciler) getSandbox(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error) {
	sb := &agentsv1beta1.Sandbox{}
	key := types.NamespacedName{Namespace: namespace, Name: name}
	err := r.client.Get(ctx, key, sb)
	if apierrors.IsNotFound(err) {
		err = r.reader.Get(ctx, key, sb)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return sb, err
}

func claimStatus(c *extensionsv1beta1.SandboxClaim) any { return c.Status }
