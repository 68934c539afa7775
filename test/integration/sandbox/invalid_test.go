package sandbox

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
)

// A pod template the API server refuses is reported with the server's message, which names the
// field, and says to fix spec.podTemplate (the pass's error is terminal: not retried until the
// Sandbox changes); the Sandbox is left as written and recovers once the template is fixed.
func TestInvalidPodTemplateIsReported(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("broken", ns).Image("").PodLabel("keep", "me").Obj()
	create(t, ctx, sb)
	got := waitSandbox(t, sb, ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonReconcilerError))
	msg := readyCondition(got).Message
	for _, want := range []string{`pod "broken"`, "fix spec.podTemplate", "spec.containers[0].image"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready message %q does not contain %q", msg, want)
		}
	}
	if got.Spec.PodTemplate.ObjectMeta.Labels["keep"] != "me" || got.Spec.PodTemplate.Spec.Containers[0].Name != "main" {
		t.Errorf("the controller changed the sandbox's spec: %+v", got.Spec.PodTemplate)
	}

	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.PodTemplate.Spec.Containers[0].Image = builder.DefaultImage })
	waitPod(t, key(sb), nil)
	waitSandbox(t, sb, ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady))
}

// A volume claim template the API server refuses names the claim and the field, and does not
// keep the Pod from being created.
func TestInvalidVolumeClaimTemplateIsReported(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("nosize", ns).Obj()
	sb.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{{
		EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "data"},
		Spec:                   corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
	}}
	create(t, ctx, sb)
	waitPod(t, key(sb), nil)
	got := waitSandbox(t, sb, ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonReconcilerError))
	msg := readyCondition(got).Message
	for _, want := range []string{`creating PVC "data-nosize"`, "spec.resources[storage]"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready message %q does not contain %q", msg, want)
		}
	}
}
