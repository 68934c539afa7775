package sandbox

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/kube"
)

// reconcilePVCs makes sure one PersistentVolumeClaim exists per volume claim template. Claims are
// never updated or deleted here: they live as long as the Sandbox and go with it through garbage
// collection.
func (r *Reconciler) reconcilePVCs(ctx context.Context, sb *agentsv1beta1.Sandbox) error {
	var errs []error
	for _, t := range sb.Spec.VolumeClaimTemplates {
		errs = append(errs, r.reconcilePVC(ctx, sb, t))
	}
	return errors.Join(errs...)
}

func (r *Reconciler) reconcilePVC(ctx context.Context, sb *agentsv1beta1.Sandbox, t agentsv1beta1.PersistentVolumeClaimTemplate) error {
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: pvcName(sb, t)}, pvc)
	switch {
	case apierrors.IsNotFound(err):
		return r.createPVC(ctx, sb, t)
	case err != nil:
		return fmt.Errorf("reading PVC %q: %w", pvcName(sb, t), err)
	}
	switch kube.OwnershipOf(pvc, sb.UID) {
	case kube.OwnedByOther:
		return fmt.Errorf("PVC %q is owned by %s, not by sandbox %q", pvc.Name, kube.DescribeController(pvc), sb.Name)
	case kube.Unowned:
		return r.adoptPVC(ctx, sb, pvc)
	}
	return nil
}

func (r *Reconciler) createPVC(ctx context.Context, sb *agentsv1beta1.Sandbox, t agentsv1beta1.PersistentVolumeClaimTemplate) error {
	owner, err := r.ownerRef(sb)
	if err != nil {
		return err
	}
	pvc := constructPVC(sb, t, owner)
	if err := r.create(ctx, pvc, "PVC "+pvc.Name); err != nil {
		return fmt.Errorf("creating PVC %q for sandbox %q: %w", pvc.Name, sb.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Created PVC", "pvc", klog.KObj(pvc))
	return nil
}
