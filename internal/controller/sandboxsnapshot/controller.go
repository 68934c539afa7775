package sandboxsnapshot

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/snapshot"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "sandboxsnapshot"

// Reconciler reconciles SandboxSnapshots.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	opts     Options
}

// New returns a Reconciler that reads and writes through c (the manager's cached client) and
// emits events with recorder (none when nil).
func New(c client.Client, recorder events.EventRecorder, opts Options) (*Reconciler, error) {
	if err := kube.CheckClient("sandbox snapshot", c); err != nil {
		return nil, err
	}
	opts, err := opts.withDefaults(c)
	if err != nil {
		return nil, err
	}
	return &Reconciler{client: c, recorder: kube.Recorder(recorder), opts: opts}, nil
}

// SetupWithManager registers the controller. Published templates are watched so that a deleted
// one shows in the snapshot's status; capture Pods are polled (see the package doc).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&snapshotsv1alpha1.SandboxSnapshot{}).
		Owns(&extensionsv1beta1.SandboxTemplate{}).
		Complete(r)
}

// Reconcile moves a snapshot through Pending, Capturing and Ready or Failed, then writes its
// status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	snap := &snapshotsv1alpha1.SandboxSnapshot{}
	if err := r.client.Get(ctx, req.NamespacedName, snap); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !snap.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, snap)
	}
	if !controllerutil.ContainsFinalizer(snap, snapshotsv1alpha1.Finalizer) {
		controllerutil.AddFinalizer(snap, snapshotsv1alpha1.Finalizer)
		// The update triggers the next pass, which starts the capture.
		return ctrl.Result{}, client.IgnoreNotFound(r.client.Update(ctx, snap))
	}
	original := snap.DeepCopy()
	res, err := r.advance(ctx, snap)
	snap.Status.ObservedGeneration = snap.Generation
	setReady(snap)
	written, werr := kube.PatchStatus(ctx, r.client, snap, original, statusOf)
	if werr != nil {
		return ctrl.Result{}, errors.Join(err, werr)
	}
	if written && original.Status.Phase != snap.Status.Phase {
		r.event(snap)
	}
	return res, err
}

// advance runs the step of snap's phase.
func (r *Reconciler) advance(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) (ctrl.Result, error) {
	switch snap.Status.Phase {
	case snapshotsv1alpha1.SnapshotPhaseReady:
		return r.publish(ctx, snap, true)
	case snapshotsv1alpha1.SnapshotPhaseFailed:
		if err := r.deleteCapturePod(ctx, snap); err != nil {
			return ctrl.Result{}, err
		}
		_, res, err := r.guardResume(ctx, snap)
		return res, err
	}
	pod, err := r.capturePod(ctx, snap)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pod != nil {
		return r.observeCapture(ctx, snap, pod)
	}
	if snap.Status.CaptureStartTime != nil {
		// The Pod was created (the status says so) and is gone without a result: whatever it
		// did is not trusted. Its SIGTERM path resumed the source.
		setFailed(snap, r.now(), snapshotsv1alpha1.ReasonCaptureLost,
			fmt.Sprintf("capture Pod %s/%s disappeared before reporting a result; create a new SandboxSnapshot to try again", r.opts.Namespace, capturePodName(snap)))
		return ctrl.Result{}, nil
	}
	return r.startCapture(ctx, snap)
}

// startCapture checks the source and creates the capture Pod.
func (r *Reconciler) startCapture(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) (ctrl.Result, error) {
	if r.opts.Repository == "" || r.opts.CaptureImage == "" {
		setWaiting(snap, snapshotsv1alpha1.ReasonCaptureNotConfigured,
			"snapshots are not configured on this cluster: start the controller with --snapshot-repository and --snapshot-capture-image")
		return ctrl.Result{}, nil
	}
	src, problem, err := r.observeSource(ctx, snap)
	if err != nil || problem != nil {
		return r.sourceProblem(snap, problem), err
	}
	pod, err := constructCapturePod(snap, src, r.opts)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("creating capture Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Started capture", "pod", klog.KObj(pod), "node", src.nodeName, "container", src.containerName)
	now := r.now()
	snap.Status.CaptureStartTime = &now
	snap.Status.NodeName = src.nodeName
	snap.Status.ContainerID = src.containerID
	snap.Status.RuntimeClassName = src.runtimeClass
	snap.Status.BaseImage = src.baseImage
	snap.Status.TemplateName = templateName(snap)
	snap.Status.Contents = []snapshotsv1alpha1.SnapshotContent{snapshotsv1alpha1.SnapshotContentFilesystem}
	snap.Status.Volumes = nil
	for _, v := range src.volumes {
		snap.Status.Volumes = append(snap.Status.Volumes, v.Name)
	}
	if len(snap.Status.Volumes) > 0 {
		snap.Status.Contents = append(snap.Status.Contents, snapshotsv1alpha1.SnapshotContentVolumes)
	}
	setCapturing(snap, fmt.Sprintf("capture Pod %s/%s runs on node %s", pod.Namespace, pod.Name, src.nodeName))
	return ctrl.Result{RequeueAfter: r.opts.PollInterval}, nil
}

// sourceProblem records why the source cannot be captured now: terminal problems fail the
// snapshot, the others keep it Pending until ReadyTimeout.
func (r *Reconciler) sourceProblem(snap *snapshotsv1alpha1.SandboxSnapshot, p *problem) ctrl.Result {
	if p == nil {
		return ctrl.Result{}
	}
	if p.terminal {
		setFailed(snap, r.now(), p.reason, p.message)
		return ctrl.Result{}
	}
	waited := r.opts.Clock.Since(snap.CreationTimestamp.Time)
	if waited >= r.opts.ReadyTimeout {
		setFailed(snap, r.now(), p.reason, fmt.Sprintf("%s, still after %s; create a new SandboxSnapshot once it is Ready", p.message, r.opts.ReadyTimeout))
		return ctrl.Result{}
	}
	setWaiting(snap, p.reason, p.message)
	return ctrl.Result{RequeueAfter: r.opts.PollInterval}
}

// observeCapture reads a capture Pod's outcome.
func (r *Reconciler) observeCapture(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot, pod *corev1.Pod) (ctrl.Result, error) {
	name := pod.Namespace + "/" + pod.Name
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		res, err := snapshot.ParseResult(terminationMessage(pod))
		switch {
		case err != nil:
			setFailed(snap, r.now(), snapshotsv1alpha1.ReasonCaptureFailed, fmt.Sprintf("capture Pod %s: %v", name, err))
		case res.Error != "":
			setFailed(snap, r.now(), snapshotsv1alpha1.ReasonCaptureFailed, fmt.Sprintf("capture Pod %s: %s", name, res.Error))
		default:
			setCaptured(snap, r.now(), res.Image, res.SizeBytes, res.PausedMilliseconds)
			return r.publish(ctx, snap, false)
		}
		return ctrl.Result{}, nil
	case corev1.PodFailed:
		msg := fmt.Sprintf("capture Pod %s failed", name)
		if res, err := snapshot.ParseResult(terminationMessage(pod)); err == nil && res.Error != "" {
			msg += ": " + res.Error
		} else if pod.Status.Reason != "" {
			msg += fmt.Sprintf(": %s: %s", pod.Status.Reason, pod.Status.Message)
		}
		setFailed(snap, r.now(), snapshotsv1alpha1.ReasonCaptureFailed, msg)
		return ctrl.Result{}, nil
	}
	if !pod.DeletionTimestamp.IsZero() {
		setFailed(snap, r.now(), snapshotsv1alpha1.ReasonCaptureLost, fmt.Sprintf("capture Pod %s was deleted before reporting a result; create a new SandboxSnapshot to try again", name))
		return ctrl.Result{}, nil
	}
	setCapturing(snap, fmt.Sprintf("capture Pod %s is %s on node %s", name, pod.Status.Phase, pod.Spec.NodeName))
	return ctrl.Result{RequeueAfter: r.opts.PollInterval}, nil
}

// publish makes sure the SandboxTemplate of a captured snapshot exists, then, with cleanup,
// removes the capture Pod, whose annotation held the spec to publish. Cleanup waits for a pass
// that read the snapshot as Ready: a pass reading an older status with the Pod already gone
// would take the capture for lost.
func (r *Reconciler) publish(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot, cleanup bool) (ctrl.Result, error) {
	snap.Status.TemplateName = templateName(snap)
	key := types.NamespacedName{Namespace: snap.Namespace, Name: snap.Status.TemplateName}
	tpl := &extensionsv1beta1.SandboxTemplate{}
	err := r.client.Get(ctx, key, tpl)
	switch {
	case err == nil:
		if kube.OwnershipOf(tpl, snap.UID) != kube.OwnedByUs {
			setTemplateReady(snap, metav1.ConditionFalse, snapshotsv1alpha1.ReasonTemplateConflict,
				fmt.Sprintf("SandboxTemplate %s exists and is controlled by %s; delete it or create a snapshot with another spec.templateName", key, kube.DescribeController(tpl)))
			return ctrl.Result{RequeueAfter: 30 * r.opts.PollInterval}, nil
		}
		setTemplateReady(snap, metav1.ConditionTrue, snapshotsv1alpha1.ReasonTemplatePublished, "SandboxTemplate "+key.Name+" runs the snapshot")
		return r.cleanup(ctx, snap, cleanup)
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	pod, err := r.capturePod(ctx, snap)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pod == nil {
		setTemplateReady(snap, metav1.ConditionFalse, snapshotsv1alpha1.ReasonTemplateMissing,
			fmt.Sprintf("SandboxTemplate %s was deleted after it was published; the image %s remains, create a new SandboxSnapshot for a template", key, snap.Status.Image))
		return ctrl.Result{}, nil
	}
	spec, annotations, err := sourceOf(pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	container := pod.Annotations[snapshotsv1alpha1.SnapshotContainerAnnotation]
	want, err := constructTemplate(snap, spec, annotations, container, snap.Status.Image)
	if err != nil {
		setTemplateReady(snap, metav1.ConditionFalse, snapshotsv1alpha1.ReasonTemplateConflict, err.Error())
		return ctrl.Result{}, nil
	}
	if err := r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("creating SandboxTemplate %s: %w", key, err)
	}
	setTemplateReady(snap, metav1.ConditionTrue, snapshotsv1alpha1.ReasonTemplatePublished, "SandboxTemplate "+key.Name+" runs the snapshot")
	return r.cleanup(ctx, snap, cleanup)
}

// cleanup deletes the capture Pod now, or asks for the pass that will.
func (r *Reconciler) cleanup(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot, now bool) (ctrl.Result, error) {
	if !now {
		return ctrl.Result{RequeueAfter: r.opts.PollInterval}, nil
	}
	return ctrl.Result{}, r.deleteCapturePod(ctx, snap)
}

// finalize removes the capture Pod (its SIGTERM path resumes the source) and, for a capture
// that had started and not finished, waits for the resume guard; a captured snapshot then
// releases its image (releaseImage). Last it removes the resume Pod and the finalizer.
func (r *Reconciler) finalize(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(snap, snapshotsv1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.deleteCapturePod(ctx, snap); err != nil {
		return ctrl.Result{}, err
	}
	original := snap.DeepCopy()
	done, res, err := r.guardResume(ctx, snap)
	if done && err == nil {
		done, res, err = r.releaseImage(ctx, snap)
	}
	if !done || err != nil {
		// The condition says what deletion waits for.
		_, werr := kube.PatchStatus(ctx, r.client, snap, original, statusOf)
		return res, errors.Join(err, client.IgnoreNotFound(werr))
	}
	if err := r.deletePod(ctx, types.NamespacedName{Namespace: r.opts.Namespace, Name: resumePodName(snap)}); err != nil {
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(snap, snapshotsv1alpha1.Finalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.client.Update(ctx, snap))
}

// capturePod reads snap's capture Pod uncached; nil when there is none.
func (r *Reconciler) capturePod(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := r.opts.APIReader.Get(ctx, types.NamespacedName{Namespace: r.opts.Namespace, Name: capturePodName(snap)}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading capture Pod %s/%s: %w", r.opts.Namespace, capturePodName(snap), err)
	}
	if pod.Labels[snapshotsv1alpha1.SnapshotUIDLabel] != string(snap.UID) {
		return nil, fmt.Errorf("pod %s/%s is not the capture Pod of snapshot %s/%s (label %s differs); delete it", pod.Namespace, pod.Name, snap.Namespace, snap.Name, snapshotsv1alpha1.SnapshotUIDLabel)
	}
	return pod, nil
}

func (r *Reconciler) deleteCapturePod(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.Namespace, Name: capturePodName(snap)}}
	if err := r.client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting capture Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (r *Reconciler) now() metav1.Time { return metav1.NewTime(r.opts.Clock.Now()) }

func (r *Reconciler) event(snap *snapshotsv1alpha1.SandboxSnapshot) {
	switch snap.Status.Phase {
	case snapshotsv1alpha1.SnapshotPhaseReady:
		r.recorder.Eventf(snap, nil, corev1.EventTypeNormal, snapshotsv1alpha1.ReasonCaptured, "Capture", "stored as %s", snap.Status.Image)
	case snapshotsv1alpha1.SnapshotPhaseFailed:
		if c := findCaptured(snap); c != nil {
			r.recorder.Eventf(snap, nil, corev1.EventTypeWarning, c.Reason, "Capture", "%s", c.Message)
		}
	}
}

// terminationMessage is the capture container's termination message, empty when none.
func terminationMessage(pod *corev1.Pod) string {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == captureContainerName && s.State.Terminated != nil {
			return s.State.Terminated.Message
		}
	}
	return ""
}
