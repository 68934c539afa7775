package sandbox

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/imageconfig"
	"github.com/paddock-dev/paddock/internal/naming"
	"github.com/paddock-dev/paddock/internal/podmeta"
	"github.com/paddock-dev/paddock/internal/serviceports"
)

// constructPod returns the Pod a Running Sandbox should have when it has none.
func constructPod(sb *agentsv1beta1.Sandbox, owner metav1.OwnerReference) *corev1.Pod {
	labels, annotations := podmeta.Apply(podMetaSource(sb), nil, nil)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            sb.Name,
			Namespace:       sb.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: *sb.Spec.PodTemplate.Spec.DeepCopy(),
	}
	pod.Spec.Volumes = mergeClaimVolumes(pod.Spec.Volumes, sb)
	// A warm member starts locked until its claim binds it; a Pod made again for a claimed
	// Sandbox (resume, eviction) serves that claim, so it starts unlocked.
	if podmeta.ClaimControlled(metav1.GetControllerOfNoCopy(sb)) {
		blueprint.Unlock(&pod.Spec)
	}
	// The sandbox's own hostname is its name, as users expect from a "stable hostname". A name
	// that is not a DNS label (dots, over 63 characters) cannot be a hostname; the kubelet then
	// derives one from the Pod name, as it does for any Pod.
	if pod.Spec.Hostname == "" && len(validation.IsDNS1123Label(sb.Name)) == 0 {
		pod.Spec.Hostname = sb.Name
	}
	return pod
}

// podToCreate is the Pod createPod sends: constructPod's, with sandboxd injected when the pod
// template asks for it (docs/byo-image.md), starting the image's own process when read (process,
// for a container with no command) and, when credentials are on, the tokens in every regular
// container. An injection the template cannot have is terminal: only its author can fix it.
func podToCreate(sb *agentsv1beta1.Sandbox, owner metav1.OwnerReference, sandboxdImage string, process *imageconfig.Process, withCredentials bool, sandboxdEnv ...corev1.EnvVar) (*corev1.Pod, error) {
	pod := constructPod(sb, owner)
	if blueprint.InjectsSandboxd(sb.Spec.PodTemplate.ObjectMeta) {
		if process != nil {
			blueprint.RunImageProcess(&pod.Spec, process.Entrypoint, process.Cmd)
		}
		if err := blueprint.InjectSandboxd(&pod.Spec, sandboxdImage); err != nil {
			return nil, reconcile.TerminalError(err)
		}
	}
	if withCredentials {
		withCredentialEnv(&pod.Spec, credentials.SandboxSecretName(sb.Name), sandboxdEnv...)
	}
	return pod, nil
}

// podMetaSource gathers what the Pod's managed labels and annotations derive from.
func podMetaSource(sb *agentsv1beta1.Sandbox) podmeta.Source {
	return podmeta.Source{
		SandboxName:         sb.Name,
		SandboxLabels:       sb.Labels,
		Controller:          metav1.GetControllerOfNoCopy(sb),
		TemplateLabels:      sb.Spec.PodTemplate.ObjectMeta.Labels,
		TemplateAnnotations: sb.Spec.PodTemplate.ObjectMeta.Annotations,
	}
}

// mergeClaimVolumes mounts one volume per claim template, named after the template. A user
// volume of the same name is replaced, as a StatefulSet does.
func mergeClaimVolumes(volumes []corev1.Volume, sb *agentsv1beta1.Sandbox) []corev1.Volume {
	if len(sb.Spec.VolumeClaimTemplates) == 0 {
		return volumes
	}
	claimed := map[string]bool{}
	for _, t := range sb.Spec.VolumeClaimTemplates {
		claimed[t.Name] = true
	}
	var merged []corev1.Volume
	for _, v := range volumes {
		if !claimed[v.Name] {
			merged = append(merged, v)
		}
	}
	for _, t := range sb.Spec.VolumeClaimTemplates {
		merged = append(merged, corev1.Volume{
			Name: t.Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: pvcName(sb, t),
			}},
		})
	}
	return merged
}

// pvcName is "<template name>-<sandbox name>".
func pvcName(sb *agentsv1beta1.Sandbox, t agentsv1beta1.PersistentVolumeClaimTemplate) string {
	return t.Name + "-" + sb.Name
}

// constructPVC returns the PersistentVolumeClaim made from one volume claim template.
func constructPVC(sb *agentsv1beta1.Sandbox, t agentsv1beta1.PersistentVolumeClaimTemplate, owner metav1.OwnerReference) *corev1.PersistentVolumeClaim {
	labels := maps.Clone(t.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[agentsv1beta1.SandboxNameHashLabel] = naming.NameHash(sb.Name)
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            pvcName(sb, t),
			Namespace:       sb.Namespace,
			Labels:          labels,
			Annotations:     maps.Clone(t.Annotations),
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: *t.Spec.DeepCopy(),
	}
}

// constructService returns the headless Service named after the Sandbox, selecting its Pod.
func constructService(sb *agentsv1beta1.Sandbox, owner metav1.OwnerReference) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            sb.Name,
			Namespace:       sb.Namespace,
			Labels:          trackingLabels(sb),
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  trackingLabels(sb),
			Ports:     serviceports.Derive(&sb.Spec.PodTemplate.Spec),
		},
	}
}

// trackingLabels is the name-hash label that selects and tracks a Sandbox's children.
func trackingLabels(sb *agentsv1beta1.Sandbox) map[string]string {
	return map[string]string{agentsv1beta1.SandboxNameHashLabel: naming.NameHash(sb.Name)}
}

// selector is status.selector: the label selector of the Sandbox's Pod.
func selector(sb *agentsv1beta1.Sandbox) string {
	return agentsv1beta1.SandboxNameHashLabel + "=" + naming.NameHash(sb.Name)
}
