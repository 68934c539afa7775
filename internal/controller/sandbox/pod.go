package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/imageconfig"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/naming"
	"github.com/paddock-dev/paddock/internal/podadmission"
	"github.com/paddock-dev/paddock/internal/podmeta"
	"github.com/paddock-dev/paddock/internal/podresize"
)

// reconcilePod finds the Sandbox's Pod and creates, adopts, relabels or deletes it according to
// operatingMode. It records the Pod in obs.
func (r *Reconciler) reconcilePod(ctx context.Context, sb *agentsv1beta1.Sandbox, obs *observation) {
	pod, err := r.findPod(ctx, sb)
	if err != nil {
		obs.podUnknown = true
		if _, ok := err.(*multiplePodsError); ok {
			obs.multiplePods = err
			return
		}
		obs.addErr(stepPod, err)
		return
	}
	if err := r.observeRootfs(ctx, sb, obs); err != nil {
		// Without the captures it is unknown whether the Pod may go or which image it runs.
		obs.podUnknown = true
		obs.addErr(stepRootfs, err)
		return
	}
	defer func() { obs.addErr(stepRootfs, r.pruneCaptures(ctx, sb, obs.ownedPod(), &obs.rootfs)) }()
	if err := r.observeMemory(ctx, sb, obs); err != nil {
		// Without the checkpoints it is unknown whether the Pod may go or where it restores.
		obs.podUnknown = true
		obs.addErr(stepMemory, err)
		return
	}
	defer func() { obs.addErr(stepMemory, r.cleanMemory(ctx, sb, obs.ownedPod(), &obs.memory)) }()
	if suspended(sb) {
		obs.addErr(stepRootfs, r.holdForCapture(ctx, sb, pod, obs))
		obs.addErr(stepMemory, r.holdForCheckpoint(ctx, sb, pod, obs))
		if obs.rootfs.hold || obs.memory.hold {
			obs.pod, obs.podOwned = pod, true
			return
		}
		obs.addErr(stepPod, r.suspendPod(ctx, sb, pod, obs))
		return
	}
	deleted, err := r.watchRestore(ctx, sb, pod, obs)
	obs.addErr(stepMemory, err)
	if deleted {
		obs.pod, obs.podOwned = pod, true // being replaced by a cold Pod
		return
	}
	obs.addErr(stepPod, r.runPod(ctx, sb, pod, obs))
	observeRunningRootfs(sb, obs.ownedPod(), &obs.rootfs)
}

type multiplePodsError struct{ n int }

func (e *multiplePodsError) Error() string {
	return fmt.Sprintf("multiple Pods (%d) are controlled by this Sandbox; refusing to choose or create a Pod", e.n)
}

// findPod returns the Sandbox's Pod: the one Pod it controls if there is one, otherwise the Pod
// named by the pod-name annotation (or after the Sandbox), whoever controls it; nil if none.
func (r *Reconciler) findPod(ctx context.Context, sb *agentsv1beta1.Sandbox) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(sb.Namespace),
		client.MatchingFields{agentsv1beta1.PodNameHashIndex: naming.NameHash(sb.Name)}); err != nil {
		return nil, fmt.Errorf("listing pods of sandbox %q: %w", sb.Name, err)
	}
	var owned []*corev1.Pod
	for i := range pods.Items {
		if kube.OwnershipOf(&pods.Items[i], sb.UID) == kube.OwnedByUs {
			owned = append(owned, &pods.Items[i])
		}
	}
	switch len(owned) {
	case 0:
	case 1:
		return owned[0], nil
	default:
		return nil, &multiplePodsError{n: len(owned)}
	}
	pod := &corev1.Pod{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: trackedPodName(sb)}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading pod %q of sandbox %q: %w", trackedPodName(sb), sb.Name, err)
	}
	return pod, nil
}

// trackedPodName is the pod-name annotation when set, else the Sandbox name.
func trackedPodName(sb *agentsv1beta1.Sandbox) string {
	if name := sb.Annotations[agentsv1beta1.PodNameAnnotation]; name != "" {
		return name
	}
	return sb.Name
}

// suspendPod deletes the owned Pod and waits for it to go. A Pod the Sandbox does not control is
// never deleted.
func (r *Reconciler) suspendPod(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, obs *observation) error {
	obs.pod = pod
	if pod == nil || kube.OwnershipOf(pod, sb.UID) != kube.OwnedByUs {
		if pod != nil {
			ctrl.LoggerFrom(ctx).Info("Not deleting a pod the sandbox does not control", "pod", klog.KObj(pod), "controller", kube.DescribeController(pod))
		}
		setPodNameAnnotation(sb, "")
		return nil
	}
	obs.podOwned = true
	if !pod.DeletionTimestamp.IsZero() {
		return nil
	}
	if err := r.client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting pod %q to suspend sandbox %q: %w", pod.Name, sb.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Deleted pod to suspend sandbox", "pod", klog.KObj(pod))
	return nil
}

// runPod makes sure a Running Sandbox has its Pod: it creates one when there is none, adopts an
// adoptable one, keeps the metadata of the owned one in line with the Sandbox, and replaces an
// owned one the kubelet rejected at admission, the next Pod held back by a back-off (reject.go).
func (r *Reconciler) runPod(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, obs *observation) error {
	if pod == nil {
		if rej, wait := r.writes.heldRejection(client.ObjectKeyFromObject(sb), time.Now()); wait > 0 {
			// Real time: the wait ends by a requeue, which the work queue counts in real time.
			obs.rejection, obs.podRetryWait = &rej, wait
			return nil
		}
		if obs.credentialsMissing {
			// A consequence, reported in Ready's message: the credentials error beside it is what
			// decides whether and when the pass is retried.
			return reconcile.TerminalError(fmt.Errorf("not creating pod of sandbox %q before its credentials secret %q exists", sb.Name, credentials.SandboxSecretName(sb.Name)))
		}
		created, existing, err := r.createPod(ctx, sb, &obs.rootfs, &obs.memory)
		switch {
		case err != nil:
			setPodNameAnnotation(sb, "") // it must not keep naming a Pod that is gone
			return err
		case created != nil:
			obs.pod, obs.podOwned = created, true
			setPodNameAnnotation(sb, created.Name)
			return nil
		}
		pod = existing // lost a race with a Pod of the same name: treat it as found
	}
	obs.pod = pod
	switch kube.OwnershipOf(pod, sb.UID) {
	case kube.OwnedByOther:
		err := fmt.Errorf("pod %q is owned by %s, not by sandbox %q", pod.Name, kube.DescribeController(pod), sb.Name)
		setPodNameAnnotation(sb, "")
		return err
	case kube.Unowned:
		if err := r.adoptPod(ctx, sb, pod); err != nil {
			return err
		}
	default:
		if podadmission.Rejected(pod) {
			return r.replaceRejectedPod(ctx, sb, pod, obs)
		}
		if podadmission.Started(pod) {
			r.writes.forgetRejections(client.ObjectKeyFromObject(sb))
		}
		if err := r.syncPodMetadata(ctx, sb, pod, obs); err != nil {
			return err
		}
		if err := r.resizePod(ctx, sb, pod, obs); err != nil {
			return err
		}
	}
	obs.podOwned = true
	setPodNameAnnotation(sb, pod.Name)
	return nil
}

// createPod creates the Pod. On AlreadyExists (a Pod of that name that the cache had not shown
// yet, usually the one this controller created a pass ago) it reads that Pod from the API server,
// since the cache cannot show it yet either, and returns it as existing.
func (r *Reconciler) createPod(ctx context.Context, sb *agentsv1beta1.Sandbox, rootfs *rootfsObservation, memory *memoryObservation) (created, existing *corev1.Pod, err error) {
	owner, err := r.ownerRef(sb)
	if err != nil {
		return nil, nil, err
	}
	var process *imageconfig.Process
	if r.opts.ImageConfigs != nil && blueprint.NeedsImageProcess(sb.Spec.PodTemplate.ObjectMeta, &sb.Spec.PodTemplate.Spec) {
		// A template the injection refuses anyway is refused without asking a registry.
		if err := blueprint.CheckInjection(&sb.Spec.PodTemplate.Spec, r.opts.SandboxdImage); err != nil {
			return nil, nil, reconcile.TerminalError(err)
		}
		p, err := r.imageProcess(ctx, sb)
		if err != nil {
			return nil, nil, err
		}
		process = &p
	}
	pod, err := podToCreate(sb, owner, r.opts.SandboxdImage, process, r.opts.CredentialsKey != nil, r.opts.SandboxdEnv...)
	if err != nil {
		return nil, nil, err
	}
	trust, err := r.egressCATrust(ctx, sb)
	if err != nil {
		return nil, nil, err
	}
	if trust {
		withEgressCA(&pod.Spec)
	}
	resumeImage(sb, pod, rootfs)
	if err := r.resumeMemory(ctx, sb, pod, memory); err != nil {
		return nil, nil, err
	}
	err = r.create(ctx, pod, "pod "+pod.Name)
	if apierrors.IsAlreadyExists(err) {
		existing = &corev1.Pod{}
		if err := r.reader().Get(ctx, client.ObjectKeyFromObject(pod), existing); err != nil {
			return nil, nil, fmt.Errorf("reading pod %q that already exists: %w", pod.Name, err)
		}
		return nil, existing, nil
	}
	if apierrors.IsInvalid(err) {
		return nil, nil, fmt.Errorf("the API server refuses pod %q as spec.podTemplate describes it; fix spec.podTemplate: %w", pod.Name, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("creating pod %q for sandbox %q: %w", pod.Name, sb.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Created pod", "pod", klog.KObj(pod))
	return pod, nil, nil
}

// syncPodMetadata patches the labels and annotations the controller owns on an existing Pod. The
// Pod's spec is never changed: a template edit applies to the next Pod. With a write-behind
// window the patch waits until the window since the Pod was first found out of date has passed.
func (r *Reconciler) syncPodMetadata(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, obs *observation) error {
	labels, annotations := podmeta.Apply(podMetaSource(sb), pod.Labels, pod.Annotations)
	if equality.Semantic.DeepEqual(labels, pod.Labels) && equality.Semantic.DeepEqual(annotations, emptyToNil(pod.Annotations)) {
		return nil
	}
	obs.podPatchPending = true // until the patch succeeds
	if wait := r.writes.holdPodPatch(client.ObjectKeyFromObject(sb), r.opts.Clock.Now()); wait > 0 {
		obs.podPatchWait = wait
		ctrl.LoggerFrom(ctx).V(4).Info("Holding back pod metadata patch", "pod", klog.KObj(pod), "wait", wait)
		return nil
	}
	base := pod.DeepCopy()
	pod.Labels, pod.Annotations = labels, annotations
	if err := r.client.Patch(ctx, pod, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("updating labels and annotations of pod %q: %w", pod.Name, err)
	}
	obs.podPatchPending = false
	return nil
}

// setPodNameAnnotation points the Sandbox's pod-name annotation at name, or removes it when name
// is empty. The change is sent with the pass's one metadata patch (patchAnnotations).
func setPodNameAnnotation(sb *agentsv1beta1.Sandbox, name string) {
	if name == "" {
		delete(sb.Annotations, agentsv1beta1.PodNameAnnotation)
		return
	}
	if sb.Annotations == nil {
		sb.Annotations = map[string]string{}
	}
	sb.Annotations[agentsv1beta1.PodNameAnnotation] = name
}

func emptyToNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// resizePod carries the CPU and memory of spec.podTemplate's containers to the running Pod through
// its resize subresource, without a restart, on Sandboxes marked for it
// (InPlaceResizeAnnotation). One patch names every container that differs; the kubelet's answer
// is read from the Pod's status (the Resized condition). A refusal by the API server (a resize
// that would change the Pod's QoS class, a container that cannot be resized) is reported in that
// condition rather than as a failed pass: it needs a new spec, not a retry.
func (r *Reconciler) resizePod(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, obs *observation) error {
	if !resizesInPlace(sb) || !pod.DeletionTimestamp.IsZero() || podFinished(pod) || podresize.Differing(pod, sb.Spec.PodTemplate.Spec.Containers) == "" {
		return nil
	}
	var containers []map[string]any
	for _, c := range sb.Spec.PodTemplate.Spec.Containers {
		containers = append(containers, map[string]any{"name": c.Name, "resources": c.Resources})
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": containers}})
	if err != nil {
		return fmt.Errorf("encoding the resize of pod %q: %w", pod.Name, err)
	}
	err = r.client.SubResource("resize").Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch))
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
		obs.resizeRefused = fmt.Sprintf("the API server refused to resize pod %q in place: %v", pod.Name, err)
		return nil
	case err != nil:
		return fmt.Errorf("resizing pod %q in place: %w", pod.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Resized pod in place", "pod", klog.KObj(pod))
	return nil
}

// resizesInPlace reports whether the Sandbox's resource changes reach its running Pod.
func resizesInPlace(sb *agentsv1beta1.Sandbox) bool {
	return sb.Annotations[agentsv1beta1.InPlaceResizeAnnotation] == "true"
}

func podFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// imageProcess reads what the image of the Sandbox's first container runs from its registry,
// with the pull secrets its Pod will have (a missing one is skipped, as the kubelet skips it).
func (r *Reconciler) imageProcess(ctx context.Context, sb *agentsv1beta1.Sandbox) (imageconfig.Process, error) {
	spec := &sb.Spec.PodTemplate.Spec
	c := &spec.Containers[0]
	refs, err := r.pullSecretNames(ctx, sb.Namespace, spec)
	if err != nil {
		return imageconfig.Process{}, err
	}
	var secrets []corev1.Secret
	for _, ref := range refs {
		var s corev1.Secret
		err := r.reader().Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: ref.Name}, &s)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return imageconfig.Process{}, fmt.Errorf("reading imagePullSecret %q: %w", ref.Name, err)
		}
		secrets = append(secrets, s)
	}
	p, err := r.opts.ImageConfigs.Read(ctx, sb.Namespace, c.Image, secrets)
	if err != nil {
		return imageconfig.Process{}, fmt.Errorf("container %q has no command, so the injected sandboxd would run its image's entrypoint: %w (fix: make the registry reachable from the controller, with imagePullSecrets in the pod template when it needs credentials, or set the container's command)", c.Name, err)
	}
	return p, nil
}

// pullSecretNames are the imagePullSecrets the Pod will have: the pod template's, or, when it
// lists none, its service account's, which the API server's ServiceAccount admission copies into
// such a Pod. A service account that does not exist gives none (the Pod's create would fail).
func (r *Reconciler) pullSecretNames(ctx context.Context, ns string, spec *corev1.PodSpec) ([]corev1.LocalObjectReference, error) {
	if len(spec.ImagePullSecrets) > 0 {
		return spec.ImagePullSecrets, nil
	}
	name := cmp.Or(spec.ServiceAccountName, spec.DeprecatedServiceAccount, "default")
	var sa corev1.ServiceAccount
	err := r.reader().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sa)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading service account %q for its imagePullSecrets: %w", name, err)
	}
	return sa.ImagePullSecrets, nil
}
