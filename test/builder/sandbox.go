// Package builder makes API objects for tests: MakeSandbox("sb", ns).Image("x").Suspended().Obj().
// Every builder starts from the smallest valid object and each method changes one thing.
package builder

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// DefaultImage is the image of the container every builder starts with.
const DefaultImage = "registry.invalid/paddock/test:latest"

// SandboxWrapper builds a Sandbox.
type SandboxWrapper struct{ sb agentsv1beta1.Sandbox }

// MakeSandbox returns a Sandbox with one container named "main".
func MakeSandbox(name, namespace string) *SandboxWrapper {
	return &SandboxWrapper{sb: agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: PodTemplate(DefaultImage),
		}},
	}}
}

// PodTemplate returns a pod template with one container named "main" running image.
func PodTemplate(image string) agentsv1beta1.PodTemplate {
	return agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Image: image}},
	}}
}

// Obj returns a copy of the Sandbox built so far.
func (w *SandboxWrapper) Obj() *agentsv1beta1.Sandbox { return w.sb.DeepCopy() }

// Image sets the image of the first container.
func (w *SandboxWrapper) Image(image string) *SandboxWrapper {
	w.sb.Spec.PodTemplate.Spec.Containers[0].Image = image
	return w
}

// PodSpec replaces the whole pod spec.
func (w *SandboxWrapper) PodSpec(spec corev1.PodSpec) *SandboxWrapper {
	w.sb.Spec.PodTemplate.Spec = spec
	return w
}

// Port adds a container port to the first container.
func (w *SandboxWrapper) Port(name string, port int32) *SandboxWrapper {
	c := &w.sb.Spec.PodTemplate.Spec.Containers[0]
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: name, ContainerPort: port})
	return w
}

// Label sets a label on the Sandbox object.
func (w *SandboxWrapper) Label(k, v string) *SandboxWrapper {
	w.sb.Labels = setKey(w.sb.Labels, k, v)
	return w
}

// Annotation sets an annotation on the Sandbox object.
func (w *SandboxWrapper) Annotation(k, v string) *SandboxWrapper {
	w.sb.Annotations = setKey(w.sb.Annotations, k, v)
	return w
}

// PodLabel sets a label in the pod template.
func (w *SandboxWrapper) PodLabel(k, v string) *SandboxWrapper {
	w.sb.Spec.PodTemplate.ObjectMeta.Labels = setKey(w.sb.Spec.PodTemplate.ObjectMeta.Labels, k, v)
	return w
}

// PodAnnotation sets an annotation in the pod template.
func (w *SandboxWrapper) PodAnnotation(k, v string) *SandboxWrapper {
	w.sb.Spec.PodTemplate.ObjectMeta.Annotations = setKey(w.sb.Spec.PodTemplate.ObjectMeta.Annotations, k, v)
	return w
}

// Suspended sets operatingMode to Suspended.
func (w *SandboxWrapper) Suspended() *SandboxWrapper {
	w.sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
	return w
}

// Running sets operatingMode to Running.
func (w *SandboxWrapper) Running() *SandboxWrapper {
	w.sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning
	return w
}

// OperatingMode sets operatingMode to any value, valid or not.
func (w *SandboxWrapper) OperatingMode(m agentsv1beta1.SandboxOperatingMode) *SandboxWrapper {
	w.sb.Spec.OperatingMode = m
	return w
}

// Service sets spec.service.
func (w *SandboxWrapper) Service(enabled bool) *SandboxWrapper {
	w.sb.Spec.Service = ptr.To(enabled)
	return w
}

// ShutdownAt sets spec.shutdownTime.
func (w *SandboxWrapper) ShutdownAt(t time.Time) *SandboxWrapper {
	w.sb.Spec.ShutdownTime = &metav1.Time{Time: t}
	return w
}

// ShutdownPolicy sets spec.shutdownPolicy.
func (w *SandboxWrapper) ShutdownPolicy(p agentsv1beta1.ShutdownPolicy) *SandboxWrapper {
	w.sb.Spec.ShutdownPolicy = ptr.To(p)
	return w
}

// VolumeClaim adds a volume claim template with one ReadWriteOnce access mode and a size.
func (w *SandboxWrapper) VolumeClaim(name, size string) *SandboxWrapper {
	w.sb.Spec.VolumeClaimTemplates = append(w.sb.Spec.VolumeClaimTemplates, VolumeClaimTemplate(name, size))
	return w
}

// VolumeClaimTemplate returns a volume claim template with one ReadWriteOnce access mode.
func VolumeClaimTemplate(name, size string) agentsv1beta1.PersistentVolumeClaimTemplate {
	return agentsv1beta1.PersistentVolumeClaimTemplate{
		EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			},
		},
	}
}

func setKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// ControlledBy adds a controller owner reference to owner, whose kind is gvk (for example a
// SandboxClaim), as an extensions controller would.
func (w *SandboxWrapper) ControlledBy(owner metav1.Object, gvk schema.GroupVersionKind) *SandboxWrapper {
	w.sb.OwnerReferences = append(w.sb.OwnerReferences, *metav1.NewControllerRef(owner, gvk))
	return w
}

// PodVolume adds an emptyDir volume to the pod template.
func (w *SandboxWrapper) PodVolume(name string) *SandboxWrapper {
	w.sb.Spec.PodTemplate.Spec.Volumes = append(w.sb.Spec.PodTemplate.Spec.Volumes,
		corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	return w
}

// Hostname sets the pod template's hostname.
func (w *SandboxWrapper) Hostname(h string) *SandboxWrapper {
	w.sb.Spec.PodTemplate.Spec.Hostname = h
	return w
}

// SidecarPort adds a restartable init container (a sidecar) that declares one port.
func (w *SandboxWrapper) SidecarPort(name string, port int32) *SandboxWrapper {
	w.sb.Spec.PodTemplate.Spec.InitContainers = append(w.sb.Spec.PodTemplate.Spec.InitContainers, corev1.Container{
		Name: "sidecar-" + name, Image: DefaultImage, RestartPolicy: restartAlways,
		Ports: []corev1.ContainerPort{{Name: name, ContainerPort: port}},
	})
	return w
}
