package builder

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// TemplateWrapper builds a SandboxTemplate.
type TemplateWrapper struct {
	t extensionsv1beta1.SandboxTemplate
}

// MakeTemplate returns a SandboxTemplate with one container named "main".
func MakeTemplate(name, namespace string) *TemplateWrapper {
	return &TemplateWrapper{t: extensionsv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: extensionsv1beta1.SandboxTemplateSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: PodTemplate(DefaultImage),
		}},
	}}
}

// Obj returns a copy of the SandboxTemplate built so far.
func (w *TemplateWrapper) Obj() *extensionsv1beta1.SandboxTemplate { return w.t.DeepCopy() }

// Image sets the image of the first container.
func (w *TemplateWrapper) Image(image string) *TemplateWrapper {
	w.t.Spec.PodTemplate.Spec.Containers[0].Image = image
	return w
}

// Annotation sets an annotation on the template.
func (w *TemplateWrapper) Annotation(k, v string) *TemplateWrapper {
	w.t.Annotations = setKey(w.t.Annotations, k, v)
	return w
}

// Sandboxd marks the template's runtime as sandboxd: members start locked, every warm claim binds
// them with claim settings, and claims with env may go warm.
func (w *TemplateWrapper) Sandboxd() *TemplateWrapper {
	return w.Annotation(extensionsv1beta1.RuntimeAnnotation, extensionsv1beta1.RuntimeSandboxd)
}

// InjectSandboxd asks for sandboxd to be injected into the first container
// (agentsv1beta1.InjectSandboxdAnnotation on the pod template): bring your own image.
func (w *TemplateWrapper) InjectSandboxd() *TemplateWrapper {
	w.t.Spec.PodTemplate.ObjectMeta.Annotations = setKey(w.t.Spec.PodTemplate.ObjectMeta.Annotations, agentsv1beta1.InjectSandboxdAnnotation, "true")
	return w
}

// Command sets the first container's command and args.
func (w *TemplateWrapper) Command(command []string, args ...string) *TemplateWrapper {
	c := &w.t.Spec.PodTemplate.Spec.Containers[0]
	c.Command, c.Args = command, args
	return w
}

// Port declares a containerPort on the first container: the router dials only declared ports.
func (w *TemplateWrapper) Port(name string, port int32) *TemplateWrapper {
	c := &w.t.Spec.PodTemplate.Spec.Containers[0]
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: name, ContainerPort: port})
	return w
}

// PodLabel sets a label in the pod template.
func (w *TemplateWrapper) PodLabel(k, v string) *TemplateWrapper {
	w.t.Spec.PodTemplate.ObjectMeta.Labels = setKey(w.t.Spec.PodTemplate.ObjectMeta.Labels, k, v)
	return w
}

// VolumeClaim adds a volume claim template.
func (w *TemplateWrapper) VolumeClaim(name, size string) *TemplateWrapper {
	w.t.Spec.VolumeClaimTemplates = append(w.t.Spec.VolumeClaimTemplates, VolumeClaimTemplate(name, size))
	return w
}

// NetworkPolicyManagement sets spec.networkPolicyManagement.
func (w *TemplateWrapper) NetworkPolicyManagement(m extensionsv1beta1.NetworkPolicyManagement) *TemplateWrapper {
	w.t.Spec.NetworkPolicyManagement = m
	return w
}

// NetworkPolicy sets custom rules.
func (w *TemplateWrapper) NetworkPolicy(p extensionsv1beta1.NetworkPolicySpec) *TemplateWrapper {
	w.t.Spec.NetworkPolicy = &p
	return w
}

// EnvVarsInjectionPolicy sets spec.envVarsInjectionPolicy.
func (w *TemplateWrapper) EnvVarsInjectionPolicy(p extensionsv1beta1.EnvVarsInjectionPolicy) *TemplateWrapper {
	w.t.Spec.EnvVarsInjectionPolicy = p
	return w
}

// Resources sets the first container's resources.
func (w *TemplateWrapper) Resources(r corev1.ResourceRequirements) *TemplateWrapper {
	w.t.Spec.PodTemplate.Spec.Containers[0].Resources = r
	return w
}

// VolumeClaimTemplatesPolicy sets spec.volumeClaimTemplatesPolicy.
func (w *TemplateWrapper) VolumeClaimTemplatesPolicy(p extensionsv1beta1.VolumeClaimTemplatesPolicy) *TemplateWrapper {
	w.t.Spec.VolumeClaimTemplatesPolicy = p
	return w
}

// WarmPoolWrapper builds a SandboxWarmPool.
type WarmPoolWrapper struct {
	p extensionsv1beta1.SandboxWarmPool
}

// MakeWarmPool returns a SandboxWarmPool of the named template, with replicas left to the default.
func MakeWarmPool(name, namespace, template string) *WarmPoolWrapper {
	return &WarmPoolWrapper{p: extensionsv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: extensionsv1beta1.SandboxWarmPoolSpec{
			TemplateRef: extensionsv1beta1.SandboxTemplateRef{Name: template},
		},
	}}
}

// Obj returns a copy of the SandboxWarmPool built so far.
func (w *WarmPoolWrapper) Obj() *extensionsv1beta1.SandboxWarmPool { return w.p.DeepCopy() }

// Replicas sets spec.replicas.
func (w *WarmPoolWrapper) Replicas(n int32) *WarmPoolWrapper {
	w.p.Spec.Replicas = ptr.To(n)
	return w
}

// Annotation sets an annotation on the pool.
func (w *WarmPoolWrapper) Annotation(k, v string) *WarmPoolWrapper {
	if w.p.Annotations == nil {
		w.p.Annotations = map[string]string{}
	}
	w.p.Annotations[k] = v
	return w
}

// Autosize turns autosize on between least and most members, with the given headroom.
func (w *WarmPoolWrapper) Autosize(least, most, headroom int) *WarmPoolWrapper {
	return w.Annotation(extensionsv1beta1.AutosizeAnnotation, "true").
		Annotation(extensionsv1beta1.AutosizeMinAnnotation, strconv.Itoa(least)).
		Annotation(extensionsv1beta1.AutosizeMaxAnnotation, strconv.Itoa(most)).
		Annotation(extensionsv1beta1.AutosizeHeadroomAnnotation, strconv.Itoa(headroom))
}

// UpdateStrategy sets spec.updateStrategy.type.
func (w *WarmPoolWrapper) UpdateStrategy(t extensionsv1beta1.SandboxWarmPoolUpdateStrategyType) *WarmPoolWrapper {
	w.p.Spec.UpdateStrategy = &extensionsv1beta1.SandboxWarmPoolUpdateStrategy{Type: t}
	return w
}

// ClaimWrapper builds a SandboxClaim.
type ClaimWrapper struct {
	c extensionsv1beta1.SandboxClaim
}

// MakeClaim returns a SandboxClaim on the named warm pool.
func MakeClaim(name, namespace, pool string) *ClaimWrapper {
	return &ClaimWrapper{c: extensionsv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: extensionsv1beta1.SandboxClaimSpec{
			WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: pool},
		},
	}}
}

// Obj returns a copy of the SandboxClaim built so far.
func (w *ClaimWrapper) Obj() *extensionsv1beta1.SandboxClaim { return w.c.DeepCopy() }

// Label sets a label on the claim.
func (w *ClaimWrapper) Label(k, v string) *ClaimWrapper {
	w.c.Labels = setKey(w.c.Labels, k, v)
	return w
}

// Annotation sets an annotation on the claim itself.
func (w *ClaimWrapper) Annotation(k, v string) *ClaimWrapper {
	w.c.Annotations = setKey(w.c.Annotations, k, v)
	return w
}

// Env adds an environment variable for the first container.
func (w *ClaimWrapper) Env(name, value string) *ClaimWrapper {
	w.c.Spec.Env = append(w.c.Spec.Env, extensionsv1beta1.EnvVar{Name: name, Value: value})
	return w
}

// PodLabel adds a label through additionalPodMetadata.
func (w *ClaimWrapper) PodLabel(k, v string) *ClaimWrapper {
	if w.c.Spec.AdditionalPodMetadata.Labels == nil {
		w.c.Spec.AdditionalPodMetadata.Labels = map[string]extensionsv1beta1.LabelValue{}
	}
	w.c.Spec.AdditionalPodMetadata.Labels[k] = extensionsv1beta1.LabelValue(v)
	return w
}

// PodAnnotation adds an annotation through additionalPodMetadata.
func (w *ClaimWrapper) PodAnnotation(k, v string) *ClaimWrapper {
	w.c.Spec.AdditionalPodMetadata.Annotations = setKey(w.c.Spec.AdditionalPodMetadata.Annotations, k, v)
	return w
}

// VolumeClaim adds a volume claim template.
func (w *ClaimWrapper) VolumeClaim(name, size string) *ClaimWrapper {
	w.c.Spec.VolumeClaimTemplates = append(w.c.Spec.VolumeClaimTemplates, VolumeClaimTemplate(name, size))
	return w
}

// Lifecycle sets spec.lifecycle.
func (w *ClaimWrapper) Lifecycle(l extensionsv1beta1.Lifecycle) *ClaimWrapper {
	w.c.Spec.Lifecycle = &l
	return w
}

// ShutdownAt sets spec.lifecycle.shutdownTime, creating lifecycle when needed.
func (w *ClaimWrapper) ShutdownAt(t time.Time) *ClaimWrapper {
	if w.c.Spec.Lifecycle == nil {
		w.c.Spec.Lifecycle = &extensionsv1beta1.Lifecycle{}
	}
	w.c.Spec.Lifecycle.ShutdownTime = &metav1.Time{Time: t}
	return w
}

// ShutdownPolicy sets spec.lifecycle.shutdownPolicy, creating lifecycle when needed.
func (w *ClaimWrapper) ShutdownPolicy(p extensionsv1beta1.ShutdownPolicy) *ClaimWrapper {
	if w.c.Spec.Lifecycle == nil {
		w.c.Spec.Lifecycle = &extensionsv1beta1.Lifecycle{}
	}
	w.c.Spec.Lifecycle.ShutdownPolicy = p
	return w
}
