package bench

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// Names of the objects a scenario creates in its own namespace.
const (
	templateName = "bench"
	poolName     = "bench"
)

// DefaultImage is what the sandboxes run: on KWOK nodes nothing is pulled, on real nodes the pause
// image starts fast and uses almost nothing.
const DefaultImage = "registry.k8s.io/pause:3.10"

// KWOK's conventional node label and taint, which fake nodes carry (kwok's own examples and
// `paddock dev up` use them).
const (
	kwokNodeLabelKey   = "type"
	kwokNodeLabelValue = "kwok"
	kwokTaintKey       = "kwok.x-k8s.io/node"
	kwokTaintValue     = "fake"
)

// blueprint is what every benchmark Sandbox runs. onKWOK places its Pod on KWOK's fake nodes,
// where it becomes Ready without a container, so the numbers measure the control plane alone.
func blueprint(image string, onKWOK bool) agentsv1beta1.SandboxBlueprint {
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}}
	if onKWOK {
		spec.NodeSelector = map[string]string{kwokNodeLabelKey: kwokNodeLabelValue}
		spec.Tolerations = []corev1.Toleration{{
			Key: kwokTaintKey, Operator: corev1.TolerationOpEqual, Value: kwokTaintValue, Effect: corev1.TaintEffectNoSchedule,
		}}
	}
	return agentsv1beta1.SandboxBlueprint{PodTemplate: agentsv1beta1.PodTemplate{Spec: spec}}
}

func newTemplate(ns, image string, onKWOK bool) *extensionsv1beta1.SandboxTemplate {
	return &extensionsv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: templateName, Namespace: ns},
		Spec:       extensionsv1beta1.SandboxTemplateSpec{SandboxBlueprint: blueprint(image, onKWOK)},
	}
}

func newPool(ns string, replicas int) *extensionsv1beta1.SandboxWarmPool {
	return &extensionsv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: poolName, Namespace: ns},
		Spec: extensionsv1beta1.SandboxWarmPoolSpec{
			Replicas:    ptr.To(int32(replicas)),
			TemplateRef: extensionsv1beta1.SandboxTemplateRef{Name: templateName},
		},
	}
}

func newClaim(ns, name string) *extensionsv1beta1.SandboxClaim {
	return &extensionsv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       extensionsv1beta1.SandboxClaimSpec{WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: poolName}},
	}
}

func newSandbox(ns, name, image string, onKWOK bool) *agentsv1beta1.Sandbox {
	return &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       agentsv1beta1.SandboxSpec{SandboxBlueprint: blueprint(image, onKWOK)},
	}
}

// objectName numbers the objects of a scenario so they sort in creation order.
func objectName(prefix string, i int) string { return fmt.Sprintf("%s-%05d", prefix, i) }
