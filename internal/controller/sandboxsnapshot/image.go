package sandboxsnapshot

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/snapshot"
)

// releaseImage runs while a captured snapshot is deleted. It deletes what would start new
// Sandboxes from the snapshot (its published template and the warm pools it controls), keeps
// the image while Sandboxes or SandboxTemplates of the namespace still run it (their Pods may
// have to pull it again, on another node or after the node's image GC), then deletes the
// manifest from the registry. It reports whether the finalizer may go: a registry that refuses
// or stays unreachable gives an event and a condition, never a stuck snapshot.
func (r *Reconciler) releaseImage(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) (bool, ctrl.Result, error) {
	if snap.Status.Image == "" {
		return true, ctrl.Result{}, nil
	}
	if err := r.retireStarters(ctx, snap); err != nil {
		return false, ctrl.Result{}, err
	}
	users, err := r.imageUsers(ctx, snap)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	if len(users) > 0 {
		setCondition(snap, snapshotsv1alpha1.ConditionImageDeleted, metav1.ConditionFalse, snapshotsv1alpha1.ReasonImageInUse,
			fmt.Sprintf("%s is kept in the registry while %s of namespace %s run it; it is deleted when the last of them is", snap.Status.Image, describeUsers(users), snap.Namespace))
		return false, ctrl.Result{RequeueAfter: 5 * r.opts.PollInterval}, nil
	}
	return r.deleteImage(ctx, snap)
}

// retireStarters deletes the published template and the warm pools snap controls (the E2B
// front door's), so that nothing new starts from an image about to go; the garbage collector
// would only get to them once the snapshot is gone.
func (r *Reconciler) retireStarters(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) error {
	var pools extensionsv1beta1.SandboxWarmPoolList
	if err := r.client.List(ctx, &pools, client.InNamespace(snap.Namespace)); err != nil {
		return fmt.Errorf("listing SandboxWarmPools of namespace %s: %w", snap.Namespace, err)
	}
	var templates extensionsv1beta1.SandboxTemplateList
	if err := r.client.List(ctx, &templates, client.InNamespace(snap.Namespace)); err != nil {
		return fmt.Errorf("listing SandboxTemplates of namespace %s: %w", snap.Namespace, err)
	}
	var owned []client.Object
	for i := range pools.Items {
		owned = append(owned, &pools.Items[i])
	}
	for i := range templates.Items {
		owned = append(owned, &templates.Items[i])
	}
	for _, obj := range owned {
		if kube.OwnershipOf(obj, snap.UID) != kube.OwnedByUs || !obj.GetDeletionTimestamp().IsZero() {
			continue
		}
		if err := r.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %T %s/%s of deleted snapshot %s: %w", obj, obj.GetNamespace(), obj.GetName(), snap.Name, err)
		}
	}
	return nil
}

// imageUsers names the Sandboxes and SandboxTemplates of snap's namespace, not being deleted and
// not controlled by snap, whose Pods run its image.
func (r *Reconciler) imageUsers(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) ([]string, error) {
	var users []string
	var sandboxes agentsv1beta1.SandboxList
	if err := r.client.List(ctx, &sandboxes, client.InNamespace(snap.Namespace)); err != nil {
		return nil, fmt.Errorf("listing Sandboxes of namespace %s: %w", snap.Namespace, err)
	}
	for i := range sandboxes.Items {
		sb := &sandboxes.Items[i]
		if sb.DeletionTimestamp.IsZero() && runsImage(&sb.Spec.PodTemplate.Spec, snap.Status.Image) {
			users = append(users, "Sandbox "+sb.Name)
		}
	}
	var templates extensionsv1beta1.SandboxTemplateList
	if err := r.client.List(ctx, &templates, client.InNamespace(snap.Namespace)); err != nil {
		return nil, fmt.Errorf("listing SandboxTemplates of namespace %s: %w", snap.Namespace, err)
	}
	for i := range templates.Items {
		tpl := &templates.Items[i]
		if tpl.DeletionTimestamp.IsZero() && kube.OwnershipOf(tpl, snap.UID) != kube.OwnedByUs && runsImage(&tpl.Spec.PodTemplate.Spec, snap.Status.Image) {
			users = append(users, "SandboxTemplate "+tpl.Name)
		}
	}
	slices.Sort(users)
	return users, nil
}

// runsImage reports whether any container of spec, init containers included, runs image.
func runsImage(spec *corev1.PodSpec, image string) bool {
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			if c.Image == image {
				return true
			}
		}
	}
	return false
}

// describeUsers lists the first few users and counts the rest.
func describeUsers(users []string) string {
	const shown = 3
	if len(users) <= shown {
		return strings.Join(users, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(users[:shown], ", "), len(users)-shown)
}

// deleteImage deletes snap's manifest from the registry through an image delete Pod on the node
// that pushed it (paddock-snapshot delete: the OCI distribution DELETE by digest, its UID tag
// first; constructImageDeletePod says why on the node). Layers are left to the registry's
// garbage collection: a layer may be shared with the base image or other snapshots. Only images
// under the snapshot namespace's path of the configured repository are deleted.
func (r *Reconciler) deleteImage(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) (bool, ctrl.Result, error) {
	image := snap.Status.Image
	if prefix := r.opts.Repository + "/" + snap.Namespace + "/"; r.opts.Repository == "" || !strings.HasPrefix(image, prefix) {
		return r.imageNotDeleted(snap, fmt.Sprintf("%s is not under %s, where this controller pushes the namespace's snapshots; delete it from its registry yourself", image, prefix))
	}
	key := types.NamespacedName{Namespace: r.opts.Namespace, Name: imageDeletePodName(snap)}
	pod := &corev1.Pod{}
	err := r.opts.APIReader.Get(ctx, key, pod)
	switch {
	case apierrors.IsNotFound(err):
		want := constructImageDeletePod(snap, r.opts)
		if err := r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, ctrl.Result{}, fmt.Errorf("creating image delete Pod %s: %w", key, err)
		}
		setCondition(snap, snapshotsv1alpha1.ConditionImageDeleted, metav1.ConditionFalse, snapshotsv1alpha1.ReasonImageDeleteRetrying,
			fmt.Sprintf("image delete Pod %s deletes %s from node %s", key, image, snap.Status.NodeName))
		return false, ctrl.Result{RequeueAfter: r.opts.PollInterval}, nil
	case err != nil:
		return false, ctrl.Result{}, fmt.Errorf("reading image delete Pod %s: %w", key, err)
	case pod.Labels[snapshotsv1alpha1.SnapshotUIDLabel] != string(snap.UID):
		return false, ctrl.Result{}, fmt.Errorf("pod %s is not the image delete Pod of snapshot %s/%s (label %s differs); delete it", key, snap.Namespace, snap.Name, snapshotsv1alpha1.SnapshotUIDLabel)
	}
	if !podFinished(pod) {
		if r.opts.Clock.Since(pod.CreationTimestamp.Time) < r.opts.ImageDeleteTimeout+imageDeleteGrace {
			setCondition(snap, snapshotsv1alpha1.ConditionImageDeleted, metav1.ConditionFalse, snapshotsv1alpha1.ReasonImageDeleteRetrying,
				fmt.Sprintf("image delete Pod %s is %s on node %s", key, pod.Status.Phase, snap.Status.NodeName))
			return false, ctrl.Result{RequeueAfter: r.opts.PollInterval}, nil
		}
		if err := r.deletePod(ctx, key); err != nil {
			return false, ctrl.Result{}, err
		}
		return r.imageNotDeleted(snap, fmt.Sprintf("image delete Pod %s did not finish within %s (phase %s, node %s); delete %s from the registry yourself",
			key, r.opts.ImageDeleteTimeout+imageDeleteGrace, pod.Status.Phase, snap.Status.NodeName, image))
	}
	if err := r.deletePod(ctx, key); err != nil {
		return false, ctrl.Result{}, err
	}
	res, perr := snapshot.ParseResult(terminationMessage(pod))
	switch {
	case perr == nil && res.Error == "":
		setCondition(snap, snapshotsv1alpha1.ConditionImageDeleted, metav1.ConditionTrue, snapshotsv1alpha1.ReasonImageDeleted, "the registry no longer serves "+image)
		r.recorder.Eventf(snap, nil, corev1.EventTypeNormal, snapshotsv1alpha1.ReasonImageDeleted, "DeleteImage", "deleted %s from the registry", image)
		ctrl.LoggerFrom(ctx).Info("Deleted the snapshot's image", "image", image)
		return true, ctrl.Result{}, nil
	case perr == nil && res.Refused:
		return r.imageNotDeleted(snap, res.Error+"; allow deletes on the registry (distribution: storage.delete.enabled) or delete it yourself")
	case perr == nil:
		return r.imageNotDeleted(snap, res.Error+"; delete it from the registry yourself")
	}
	return r.imageNotDeleted(snap, fmt.Sprintf("image delete Pod %s: %v (%s); delete %s from the registry yourself", key, perr, podOutcome(pod), image))
}

// imageNotDeleted gives up on the image: the snapshot goes, and a warning event says what
// remains in the registry.
func (r *Reconciler) imageNotDeleted(snap *snapshotsv1alpha1.SandboxSnapshot, msg string) (bool, ctrl.Result, error) {
	if c := meta.FindStatusCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionImageDeleted); c == nil || c.Reason != snapshotsv1alpha1.ReasonImageNotDeleted {
		r.recorder.Eventf(snap, nil, corev1.EventTypeWarning, snapshotsv1alpha1.ReasonImageNotDeleted, "DeleteImage", "%s", msg)
	}
	setCondition(snap, snapshotsv1alpha1.ConditionImageDeleted, metav1.ConditionFalse, snapshotsv1alpha1.ReasonImageNotDeleted, msg)
	return true, ctrl.Result{}, nil
}
