package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/imageconfig"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/tracing"
)

// ControllerName names the controller, its event recorder and its field manager.
const ControllerName = "sandbox-controller"

// Defaults of the options.
const (
	DefaultClusterDomain = "cluster.local"
	DefaultWorkers       = 100
)

// fieldOwner is the field manager of every object this controller creates.
var fieldOwner = client.FieldOwner(ControllerName)

// Options configure the Reconciler. Start from DefaultOptions; New gives the zero fields whose
// zero means nothing (workers, cluster domain, clock) their defaults.
type Options struct {
	// ClusterDomain is the DNS domain used in status.serviceFQDN (default cluster.local).
	ClusterDomain string
	// Workers is how many Sandboxes are reconciled concurrently (default 100).
	Workers int
	// StatusCoalesceWindow is how long a status change that only reports a Sandbox still starting
	// up may wait to be written with the next one (DefaultOptions: DefaultStatusCoalesceWindow;
	// 0 writes every change at once).
	StatusCoalesceWindow time.Duration
	// WriteBehindWindow holds back the metadata patch of an owned Pod for up to this long (capped
	// at MaxWriteBehindWindow) after the controller first finds it out of date, so that edits in
	// quick succession cost one Pod write. 0, the default, patches at once.
	WriteBehindWindow time.Duration
	// APIReader is the uncached reader (the manager's GetAPIReader) used to read a Pod that the
	// API server has but the cache does not show yet; the client when nil.
	APIReader client.Reader
	// CredentialsKey turns on per-Sandbox credentials derived from it (the installation's key,
	// credentials.KeyFromSecret). Nil creates no credentials Secret and adds no token variables,
	// which is manager --sandbox-credentials=false.
	CredentialsKey []byte
	// SandboxdEnv is added to every container with the tokens, replacing the template's variables
	// of those names (manager --sandboxd-allow-unauthenticated-network). Needs CredentialsKey.
	SandboxdEnv []corev1.EnvVar
	// SandboxdImage is the image the init container copies sandboxd from into Pods whose pod
	// template asks for injection (agentsv1beta1.InjectSandboxdAnnotation, docs/byo-image.md);
	// empty refuses such Sandboxes (InjectionInvalid). It is manager --sandboxd-image.
	SandboxdImage string
	// ImageConfigs reads what an image runs from its registry, for a template that asks for
	// injection and gives its container no command (docs/byo-image.md); nil starts sandboxd alone
	// in such a container, and refuses args without a command.
	ImageConfigs *imageconfig.Reader
	// TracerProvider makes each pass a "ReconcileSandbox" span, a child of the trace recorded in
	// the Sandbox's trace-context annotation (tracing.go). Nil, the default, traces nothing and
	// writes no annotation.
	TracerProvider trace.TracerProvider
	// Clock tells the time of expiry; the real clock when nil.
	Clock clock.PassiveClock
	// EgressCASecret is the installation's egress CA (paddock-egress's --ca-secret), whose tls.crt
	// Pods with an egress policy trust (egressca.go); empty gives them nothing.
	EgressCASecret types.NamespacedName
	// SuspendCaptures serves snapshots.paddock.dev/suspend: rootfs (rootfs.go): the controller
	// creates, watches and deletes the SandboxSnapshots of suspensions. It needs the
	// SandboxSnapshot CRD, which the extensions install; off, the annotation is ignored.
	SuspendCaptures bool
	// SuspendCapturesUnavailable, when not empty, says why this cluster cannot capture (no
	// snapshot repository or capture image): annotated Sandboxes then suspend as upstream and
	// report it in RootfsKept.
	SuspendCapturesUnavailable string
	// Memory serves snapshots.paddock.dev/suspend: memory (memory.go): gVisor checkpoints on
	// the node before a suspended Pod goes, restored by the next Pod. Without Image and Runsc
	// the annotation suspends with volumes only and says so in MemoryKept.
	Memory MemoryOptions
}

// DefaultOptions returns the defaults New gives zero fields.
func DefaultOptions() Options {
	return Options{ClusterDomain: DefaultClusterDomain, Workers: DefaultWorkers,
		StatusCoalesceWindow: DefaultStatusCoalesceWindow, Clock: clock.RealClock{}}
}

// Reconciler reconciles Sandboxes. Build it with New.
type Reconciler struct {
	client   client.Client
	scheme   *runtime.Scheme
	recorder events.EventRecorder
	opts     Options
	// apiReader reads past the cache where the cache cannot have caught up yet.
	apiReader client.Reader
	tracer    trace.Tracer
	// writes is all the controller remembers of each Sandbox between passes (writes.go).
	writes *writeMemory
	// terminating holds creates of children in namespaces that are being deleted.
	terminating *kube.TerminatingNamespaces
}

// New returns a Reconciler that reads and writes through c (normally the manager's cached
// client, whose scheme resolves kinds) and emits events with recorder (none when nil). Start
// from DefaultOptions: New fills only the zero fields whose zero means nothing (workers, cluster
// domain, clock, reader); a negative one is an error naming it.
func New(c client.Client, recorder events.EventRecorder, opts Options) (*Reconciler, error) {
	if err := kube.CheckClient("sandbox", c); err != nil {
		return nil, err
	}
	def := DefaultOptions()
	switch {
	case opts.Workers < 0:
		return nil, fmt.Errorf("sandbox reconciler option Workers is %d; set at least 1", opts.Workers)
	case opts.StatusCoalesceWindow < 0:
		return nil, fmt.Errorf("sandbox reconciler option StatusCoalesceWindow is %v; set 0 or more", opts.StatusCoalesceWindow)
	case opts.WriteBehindWindow < 0:
		return nil, fmt.Errorf("sandbox reconciler option WriteBehindWindow is %s; set 0 (off) or a positive duration", opts.WriteBehindWindow)
	}
	opts.ClusterDomain = cmp.Or(opts.ClusterDomain, def.ClusterDomain)
	opts.Workers = cmp.Or(opts.Workers, def.Workers)
	opts.CredentialsKey = bytes.Clone(opts.CredentialsKey)
	if opts.Clock == nil {
		opts.Clock = def.Clock
	}
	r := &Reconciler{client: c, scheme: c.Scheme(), recorder: kube.Recorder(recorder), opts: opts,
		apiReader: cmp.Or[client.Reader](opts.APIReader, c), tracer: defaultTracer(),
		writes: newWriteMemory(opts.WriteBehindWindow, opts.StatusCoalesceWindow), terminating: kube.NewTerminatingNamespaces(opts.Clock)}
	if opts.TracerProvider != nil {
		r.tracer = opts.TracerProvider.Tracer(tracing.ControllerTracerName)
	}
	return r, nil
}

// Reconcile brings one Sandbox's children in line with its spec and reports them in its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	sb := &agentsv1beta1.Sandbox{}
	if err := r.client.Get(ctx, req.NamespacedName, sb); err != nil {
		if apierrors.IsNotFound(err) {
			r.writes.forget(req.NamespacedName)
			// Its memory images are in the controller's namespace, out of garbage collection's reach.
			return ctrl.Result{}, r.cleanDeletedMemory(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if !sb.DeletionTimestamp.IsZero() {
		r.writes.forget(req.NamespacedName)
		return ctrl.Result{}, nil // garbage collection removes the children
	}
	if r.writes.stale(req.NamespacedName, sb.ResourceVersion) {
		return ctrl.Result{RequeueAfter: staleCacheRetry}, nil // our last write is still on its way
	}
	read := sb.ResourceVersion
	defer func() { r.writes.recordWrite(req.NamespacedName, read, sb.ResourceVersion) }()
	ctx, span := r.startSpan(ctx, sb)
	defer func() { endSpan(span, err) }()
	before := sb.Status.DeepCopy()

	annotations := annotationsAsRead(sb)
	recordTraceContext(ctx, sb)

	var obs observation
	var result ctrl.Result
	switch now := r.opts.Clock.Now(); {
	case !expired(sb, now):
		obs = r.reconcileChildren(ctx, sb)
		obs.addErr(stepMetadata, annotations.patch(ctx, r.client, sb))
		computeStatus(sb, &obs, r.opts.ClusterDomain)
		result = soonest(soonest(soonest(r.scheduleExpiry(sb), obs.podPatchWait), obs.memory.requeue), obs.podRetryWait)
	case !markedExpired(sb):
		// First of two passes: persist the verdict before tearing anything down.
		markExpired(sb)
		result = ctrl.Result{RequeueAfter: expiryTeardownDelay}
	default:
		deleted, err := r.tearDownExpired(ctx, sb)
		obs.addErr(stepExpiry, err)
		if deleted {
			return kube.Result(ctx, ctrl.Result{}, obs.err())
		}
	}
	if !obs.podPatchPending {
		r.writes.releasePodPatch(req.NamespacedName)
	}

	obs.addErr(stepMetadata, annotations.patch(ctx, r.client, sb)) // expiry passes: the trace context
	held, err := r.writeStatus(ctx, sb, before)
	if err != nil {
		obs.addErr(stepStatus, err)
		return kube.Result(ctx, ctrl.Result{}, obs.err())
	}
	result = soonest(result, held)
	r.emitEvents(sb, before)
	r.emitRejection(sb, &obs)
	observePodReady(sb, before, obs.pod, r.opts.Clock.Now())
	return kube.Result(ctx, result, obs.err())
}

// reconcileChildren reconciles volume claims, then the Pod, then the Service, and records what
// it saw. A volume claim problem does not stop the Pod from being reconciled.
func (r *Reconciler) reconcileChildren(ctx context.Context, sb *agentsv1beta1.Sandbox) observation {
	var obs observation
	obs.addErr(stepPVC, r.reconcilePVCs(ctx, sb))
	if err := r.reconcileCredentials(ctx, sb); err != nil {
		obs.credentialsMissing = true // no Pod is created without its tokens
		obs.addErr(stepCredentials, err)
	}
	r.reconcilePod(ctx, sb, &obs)
	if obs.multiplePods != nil {
		obs.serviceSkipped = true // nothing is decided while the Pod is ambiguous
		return obs
	}
	svc, err := r.reconcileService(ctx, sb)
	obs.service = svc
	obs.addErr(stepService, err)
	return obs
}

// sandboxAnnotations are the Sandbox's annotations as last read or written; a pass changes
// sb.Annotations in memory and sends all its changes in one merge patch.
type sandboxAnnotations struct{ read map[string]string }

func annotationsAsRead(sb *agentsv1beta1.Sandbox) *sandboxAnnotations {
	return &sandboxAnnotations{read: maps.Clone(sb.Annotations)}
}

// patch sends the changes made to sb.Annotations since they were read, if any. The status being
// computed in sb is kept: the patch response must not replace it.
func (a *sandboxAnnotations) patch(ctx context.Context, c client.Client, sb *agentsv1beta1.Sandbox) error {
	if maps.Equal(a.read, sb.Annotations) {
		return nil
	}
	base := sb.DeepCopy()
	base.Annotations = a.read
	status := sb.Status.DeepCopy()
	err := c.Patch(ctx, sb, client.MergeFrom(base))
	sb.Status = *status
	a.read = maps.Clone(sb.Annotations) // a failed patch is retried by the next pass, not this one
	if err != nil {
		return fmt.Errorf("updating annotations of sandbox %q: %w", sb.Name, err)
	}
	return nil
}

// emitEvents reports transitions that a user should see in `kubectl describe`.
func (r *Reconciler) emitEvents(sb *agentsv1beta1.Sandbox, before *agentsv1beta1.SandboxStatus) {
	ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	was := meta.FindStatusCondition(before.Conditions, agentsv1beta1.SandboxConditionReady)
	if ready != nil && ready.Reason == agentsv1beta1.SandboxReasonMultiplePods && (was == nil || was.Reason != ready.Reason) {
		r.recorder.Eventf(sb, nil, corev1.EventTypeWarning, agentsv1beta1.SandboxReasonMultiplePods, "Reconciling", "%s", ready.Message)
	}
	kept := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionMemoryKept)
	wasKept := meta.FindStatusCondition(before.Conditions, agentsv1beta1.SandboxConditionMemoryKept)
	if kept != nil && kept.Reason == agentsv1beta1.SandboxReasonMemoryRestoreFailed && (wasKept == nil || wasKept.Reason != kept.Reason) {
		r.recorder.Eventf(sb, nil, corev1.EventTypeWarning, agentsv1beta1.SandboxReasonMemoryRestoreFailed, "Restoring", "%s", kept.Message)
	}
}

// ownerRef is the controller owner reference every child of sb carries.
func (r *Reconciler) ownerRef(sb *agentsv1beta1.Sandbox) (metav1.OwnerReference, error) {
	gvk, err := apiutil.GVKForObject(sb, r.scheme)
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("sandbox kind is not in the scheme: %w", err)
	}
	return *metav1.NewControllerRef(sb, gvk), nil
}

// SetupWithManager registers the controller. The field indexes must be registered first, with
// indexes.Register.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Children without the tracking label are not ours to react to, even if owned.
	tracked := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[agentsv1beta1.SandboxNameHashLabel]
		return ok
	}))
	b := ctrl.NewControllerManagedBy(mgr)
	if r.opts.SuspendCaptures {
		// A capture's phase decides when a suspended Sandbox's Pod may go.
		b = b.Owns(&snapshotsv1alpha1.SandboxSnapshot{}, tracked)
	}
	if r.opts.Memory.unavailable() == "" {
		// A memory checkpoint's phase decides when a suspended Sandbox's Pod may go; the node
		// Pods are in the controller's namespace, so no owner reference leads to the Sandbox.
		b = b.Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(memoryPodRequests),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				_, ok := o.GetLabels()[snapshotsv1alpha1.MemoryOpLabel]
				return ok && o.GetNamespace() == r.opts.Memory.Namespace
			})))
	}
	return b.
		Named("sandbox").
		// Only this controller writes the status and it has acted on what it wrote. A finalizer
		// change starts a pass, as it does the claim controller's: nothing here reads finalizers,
		// but a pass that finds nothing new writes nothing, and one filter serves both controllers.
		For(&agentsv1beta1.Sandbox{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: kube.BeyondStatus})).
		Owns(&corev1.Pod{}, tracked).
		Owns(&corev1.Service{}, tracked).
		// The credentials Secret: repaired when changed, re-created when deleted. Its creation
		// is this controller's own doing and needs no pass.
		Owns(&corev1.Secret{}, tracked, builder.WithPredicates(predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.Workers}).
		Complete(r)
}

// observation is what one pass saw and the errors it met, from which status is computed.
type observation struct {
	// pod is the Sandbox's current Pod, owned or not; nil when there is none or it is unknown.
	pod      *corev1.Pod
	podOwned bool
	// podUnknown is set when the Pod could not be determined (lookup error, several Pods).
	podUnknown   bool
	multiplePods error
	// service is the Service kept or created this pass; serviceSkipped when it was not looked at.
	service        *corev1.Service
	serviceSkipped bool
	// podPatchPending is set while the owned Pod's metadata patch is held back or failed;
	// podPatchWait is how long it is still held back.
	podPatchPending bool
	podPatchWait    time.Duration
	// resizeRefused says why the API server refused to resize the Pod in place; "" when it did not.
	resizeRefused string
	// rootfs is what the pass saw of the root filesystem captures (rootfs.go).
	rootfs rootfsObservation
	// memory is what the pass saw of the memory checkpoints (memory.go).
	memory memoryObservation
	// rejection is set while the Sandbox waits for the Pod that replaces one the kubelet rejected
	// at admission; rejectedPod is that Pod when this pass deleted it; podRetryWait is how long
	// the new Pod is still held back (reject.go).
	rejection    *podRejection
	rejectedPod  *corev1.Pod
	podRetryWait time.Duration
	// credentialsMissing is set when the credentials Secret could not be made sure of.
	credentialsMissing bool
	errs               []error
}

// Steps of a pass, the label of the reconcile error metric.
const (
	stepPVC         = "pvc"
	stepPod         = "pod"
	stepCredentials = "credentials"
	stepService     = "service"
	stepExpiry      = "expiry"
	stepStatus      = "status"
	stepMetadata    = "metadata"
)

// soonest adds a requeue after d (when d > 0) to res, keeping the earlier of the two.
func soonest(res ctrl.Result, d time.Duration) ctrl.Result {
	if d > 0 && (res.RequeueAfter == 0 || d < res.RequeueAfter) {
		res.RequeueAfter = d
	}
	return res
}

func (o *observation) addErr(step string, err error) {
	if err == nil {
		return
	}
	reconcileErrors.WithLabelValues(step).Inc()
	o.errs = append(o.errs, err)
}

// err is what the pass returns to the work queue. Several owned Pods, and a child the API
// server refuses as invalid (built from what the user wrote in the spec), only a human can
// resolve: those errors are terminal, logged and counted but not retried; the Sandbox's watch
// brings the pass after the fix.
func (o *observation) err() error {
	errs := make([]error, 0, len(o.errs)+1)
	for _, err := range o.errs {
		errs = append(errs, kube.RefusedAsInvalid(err))
	}
	if o.multiplePods != nil {
		errs = append(errs, reconcile.TerminalError(o.multiplePods))
	}
	return errors.Join(errs...)
}

// message is the errors of the pass as the Ready condition reports them.
func (o *observation) message() string { return errors.Join(o.errs...).Error() }
