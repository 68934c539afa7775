package sandbox

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/naming"
	"github.com/paddock-dev/paddock/internal/podmeta"
	"github.com/paddock-dev/paddock/internal/serviceports"
)

// adoptable reports whether an object without a controller may be adopted by sb: its owner
// opted in with the adoptable label, or it already carries sb's tracking label.
func adoptable(sb *agentsv1beta1.Sandbox, obj metav1.Object) bool {
	labels := obj.GetLabels()
	return labels[agentsv1beta1.AdoptableLabel] == "true" ||
		labels[agentsv1beta1.SandboxNameHashLabel] == naming.NameHash(sb.Name)
}

// notAdoptableError explains how to let a Sandbox adopt an object it found under its name.
func notAdoptableError(kind, name string, sb *agentsv1beta1.Sandbox) error {
	return fmt.Errorf("cannot adopt unowned %s %q: label it %s=true to let sandbox %q adopt it, or delete or rename it",
		kind, name, agentsv1beta1.AdoptableLabel, sb.Name)
}

// adoptPod makes sb the controller of an unowned Pod and brings its metadata in line, in one
// patch. The patch carries the resourceVersion so that two would-be adopters cannot both win.
func (r *Reconciler) adoptPod(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod) error {
	if !adoptable(sb, pod) {
		return notAdoptableError("pod", pod.Name, sb)
	}
	owner, err := r.ownerRef(sb)
	if err != nil {
		return err
	}
	base := pod.DeepCopy()
	pod.OwnerReferences = append(pod.OwnerReferences, owner)
	pod.Labels, pod.Annotations = podmeta.Apply(podMetaSource(sb), pod.Labels, pod.Annotations)
	if err := r.client.Patch(ctx, pod, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adopting pod %q: %w", pod.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Adopted pod", "pod", klog.KObj(pod))
	return nil
}

// adoptPVC makes sb the controller of an unowned PersistentVolumeClaim.
func (r *Reconciler) adoptPVC(ctx context.Context, sb *agentsv1beta1.Sandbox, pvc *corev1.PersistentVolumeClaim) error {
	if !adoptable(sb, pvc) {
		return notAdoptableError("PVC", pvc.Name, sb)
	}
	owner, err := r.ownerRef(sb)
	if err != nil {
		return err
	}
	base := pvc.DeepCopy()
	pvc.OwnerReferences = append(pvc.OwnerReferences, owner)
	if err := r.client.Patch(ctx, pvc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adopting PVC %q: %w", pvc.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Adopted PVC", "pvc", klog.KObj(pvc))
	return nil
}

// adoptService makes sb the controller of an unowned headless Service and points it at sb's Pod.
// A Service with a cluster IP cannot become headless (the field is immutable), so it is refused.
func (r *Reconciler) adoptService(ctx context.Context, sb *agentsv1beta1.Sandbox, svc *corev1.Service) error {
	if !adoptable(sb, svc) {
		return notAdoptableError("service", svc.Name, sb)
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		return fmt.Errorf("cannot adopt service %q: its ClusterIP is %q (expected %q, field is immutable); delete it so the sandbox can create a headless one",
			svc.Name, ip, corev1.ClusterIPNone)
	}
	owner, err := r.ownerRef(sb)
	if err != nil {
		return err
	}
	if svc.Labels == nil {
		svc.Labels = map[string]string{}
	}
	svc.Labels[agentsv1beta1.SandboxNameHashLabel] = naming.NameHash(sb.Name)
	// The API server makes a selectorless headless Service RequireDualStack, which turns invalid
	// on a single-stack cluster once it gets a selector. Single stack on the primary family is
	// valid on every cluster (and the only policy allowed to drop the second family).
	if len(svc.Spec.Selector) == 0 && ptr.Deref(svc.Spec.IPFamilyPolicy, "") == corev1.IPFamilyPolicyRequireDualStack {
		svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		svc.Spec.IPFamilies = svc.Spec.IPFamilies[:min(1, len(svc.Spec.IPFamilies))]
	}
	svc.Spec.Selector = trackingLabels(sb)
	svc.Spec.Ports = serviceports.Derive(&sb.Spec.PodTemplate.Spec)
	svc.OwnerReferences = append(svc.OwnerReferences, owner)
	if err := r.client.Update(ctx, svc); err != nil {
		return fmt.Errorf("adopting service %q: %w", svc.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Adopted service", "service", klog.KObj(svc))
	return nil
}
