package sandbox

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/naming"
	"github.com/paddock-dev/paddock/internal/serviceports"
)

// reconcileService applies spec.service to the Service named after the Sandbox: true creates or
// adopts and repairs it, false deletes an owned one, unset keeps an owned one without creating
// it. It returns the Service the Sandbox has after the pass, or nil.
func (r *Reconciler) reconcileService(ctx context.Context, sb *agentsv1beta1.Sandbox) (*corev1.Service, error) {
	want := sb.Spec.Service
	svc := &corev1.Service{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: sb.Name}, svc)
	switch {
	case apierrors.IsNotFound(err):
		if want == nil || !*want {
			return nil, nil
		}
		return r.createService(ctx, sb)
	case err != nil:
		return nil, fmt.Errorf("reading service %q: %w", sb.Name, err)
	}

	ownership := kube.OwnershipOf(svc, sb.UID)
	switch {
	case want != nil && !*want:
		if ownership == kube.OwnedByUs {
			if err := r.client.Delete(ctx, svc); client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("deleting service %q (spec.service is false): %w", svc.Name, err)
			}
			ctrl.LoggerFrom(ctx).V(2).Info("Deleted service", "service", klog.KObj(svc))
		}
		return nil, nil
	case ownership == kube.OwnedByOther:
		return nil, fmt.Errorf("service %q is owned by %s, not by sandbox %q", svc.Name, kube.DescribeController(svc), sb.Name)
	case ownership == kube.Unowned && want == nil:
		return nil, nil // a user's own Service of the same name; only spec.service: true claims it
	case ownership == kube.Unowned:
		if err := r.adoptService(ctx, sb, svc); err != nil {
			return nil, err
		}
		return svc, nil
	}
	return svc, r.repairService(ctx, sb, svc)
}

func (r *Reconciler) createService(ctx context.Context, sb *agentsv1beta1.Sandbox) (*corev1.Service, error) {
	owner, err := r.ownerRef(sb)
	if err != nil {
		return nil, err
	}
	svc := constructService(sb, owner)
	if err := r.create(ctx, svc, "service "+svc.Name); err != nil {
		return nil, fmt.Errorf("creating service %q: %w", svc.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Created service", "service", klog.KObj(svc))
	return svc, nil
}

// repairService restores the tracking label, the selector and, when the Service is asked for
// explicitly, the ports of an owned Service, in one merge patch.
func (r *Reconciler) repairService(ctx context.Context, sb *agentsv1beta1.Sandbox, svc *corev1.Service) error {
	base := svc.DeepCopy()
	if svc.Labels[agentsv1beta1.SandboxNameHashLabel] != naming.NameHash(sb.Name) {
		svc.Labels = maps.Clone(svc.Labels)
		if svc.Labels == nil {
			svc.Labels = map[string]string{}
		}
		svc.Labels[agentsv1beta1.SandboxNameHashLabel] = naming.NameHash(sb.Name)
	}
	svc.Spec.Selector = trackingLabels(sb)
	if sb.Spec.Service != nil && *sb.Spec.Service {
		svc.Spec.Ports = serviceports.Derive(&sb.Spec.PodTemplate.Spec)
	}
	if equality.Semantic.DeepEqual(base, svc) {
		return nil
	}
	if err := r.client.Patch(ctx, svc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("repairing service %q: %w", svc.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Repaired service", "service", klog.KObj(svc))
	return nil
}
