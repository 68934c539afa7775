package builder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// PodWrapper builds a Pod, for tests that pre-create the objects a controller finds.
type PodWrapper struct{ p corev1.Pod }

// MakePod returns a Pod with one container named "main".
func MakePod(name, namespace string) *PodWrapper {
	return &PodWrapper{p: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: DefaultImage}}},
	}}
}

// Obj returns a copy of the Pod built so far.
func (w *PodWrapper) Obj() *corev1.Pod { return w.p.DeepCopy() }

// Label sets a label.
func (w *PodWrapper) Label(k, v string) *PodWrapper {
	w.p.Labels = setKey(w.p.Labels, k, v)
	return w
}

// Annotation sets an annotation.
func (w *PodWrapper) Annotation(k, v string) *PodWrapper {
	w.p.Annotations = setKey(w.p.Annotations, k, v)
	return w
}

// ControlledBy adds a controller owner reference to owner, whose kind is gvk.
func (w *PodWrapper) ControlledBy(owner metav1.Object, gvk schema.GroupVersionKind) *PodWrapper {
	w.p.OwnerReferences = append(w.p.OwnerReferences, *metav1.NewControllerRef(owner, gvk))
	return w
}

// Finalizer adds a finalizer, to keep a deleted Pod Terminating.
func (w *PodWrapper) Finalizer(f string) *PodWrapper {
	w.p.Finalizers = append(w.p.Finalizers, f)
	return w
}

// ServiceWrapper builds a Service.
type ServiceWrapper struct{ s corev1.Service }

// MakeService returns a headless Service without ports.
func MakeService(name, namespace string) *ServiceWrapper {
	return &ServiceWrapper{s: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone},
	}}
}

// Obj returns a copy of the Service built so far.
func (w *ServiceWrapper) Obj() *corev1.Service { return w.s.DeepCopy() }

// Label sets a label.
func (w *ServiceWrapper) Label(k, v string) *ServiceWrapper {
	w.s.Labels = setKey(w.s.Labels, k, v)
	return w
}

// ClusterIP sets spec.clusterIP ("" lets the API server allocate one).
func (w *ServiceWrapper) ClusterIP(ip string) *ServiceWrapper {
	w.s.Spec.ClusterIP = ip
	return w
}

// Port adds a TCP port.
func (w *ServiceWrapper) Port(name string, port int32) *ServiceWrapper {
	w.s.Spec.Ports = append(w.s.Spec.Ports, corev1.ServicePort{Name: name, Port: port})
	return w
}

// Selector sets one selector entry.
func (w *ServiceWrapper) Selector(k, v string) *ServiceWrapper {
	w.s.Spec.Selector = setKey(w.s.Spec.Selector, k, v)
	return w
}

// ControlledBy adds a controller owner reference to owner, whose kind is gvk.
func (w *ServiceWrapper) ControlledBy(owner metav1.Object, gvk schema.GroupVersionKind) *ServiceWrapper {
	w.s.OwnerReferences = append(w.s.OwnerReferences, *metav1.NewControllerRef(owner, gvk))
	return w
}

// PVCWrapper builds a PersistentVolumeClaim.
type PVCWrapper struct{ c corev1.PersistentVolumeClaim }

// MakePVC returns a ReadWriteOnce claim of the given size.
func MakePVC(name, namespace, size string) *PVCWrapper {
	t := VolumeClaimTemplate(name, size)
	return &PVCWrapper{c: corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       t.Spec,
	}}
}

// Obj returns a copy of the claim built so far.
func (w *PVCWrapper) Obj() *corev1.PersistentVolumeClaim { return w.c.DeepCopy() }

// Label sets a label.
func (w *PVCWrapper) Label(k, v string) *PVCWrapper {
	w.c.Labels = setKey(w.c.Labels, k, v)
	return w
}

// ControlledBy adds a controller owner reference to owner, whose kind is gvk.
func (w *PVCWrapper) ControlledBy(owner metav1.Object, gvk schema.GroupVersionKind) *PVCWrapper {
	w.c.OwnerReferences = append(w.c.OwnerReferences, *metav1.NewControllerRef(owner, gvk))
	return w
}

// ConfigMapOwner returns a ConfigMap to use as a foreign controller in ownership tests; create it
// so its UID is real.
func ConfigMapOwner(name, namespace string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
}

// ConfigMapKind is the GroupVersionKind of a ConfigMap, for ControlledBy.
var ConfigMapKind = corev1.SchemeGroupVersion.WithKind("ConfigMap")

// restartAlways is the restart policy of a sidecar init container.
var restartAlways = ptr.To(corev1.ContainerRestartPolicyAlways)
