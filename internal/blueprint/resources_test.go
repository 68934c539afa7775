package blueprint

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/podresize"
)

func sized(cpu, memory string) corev1.ResourceRequirements {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// TestWarmResources: a member of a pool with idle sizes waits small and is marked for in-place
// resize; adopting it gives it the template's resources, or the claim's; a claim on a member
// already of its size changes nothing; a cold Sandbox gets the claim's size; the idle size never
// makes a member stale.
func TestWarmResources(t *testing.T) {
	tpl := template()
	tpl.Spec.PodTemplate.Spec.Containers[0].Resources = sized("1", "1Gi")
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"}}
	idle, err := podresize.Idle(map[string]string{extensionsv1beta1.IdleCPUAnnotation: "10m", extensionsv1beta1.IdleMemoryAnnotation: "32Mi"})
	if err != nil {
		t.Fatal(err)
	}
	member := func() *agentsv1beta1.Sandbox {
		sb := PoolMember(pool, tpl, PoolOptions{Idle: idle})
		sb.Name = "pool-abcde"
		return sb
	}
	first := func(sb *agentsv1beta1.Sandbox) corev1.ResourceRequirements {
		return sb.Spec.PodTemplate.Spec.Containers[0].Resources
	}

	sb := member()
	if !podresize.Equal(first(sb), sized("10m", "32Mi")) || sb.Annotations[agentsv1beta1.InPlaceResizeAnnotation] != "true" {
		t.Fatalf("idle member: resources %v, annotations %v; want 10m/32Mi and the in-place-resize mark", first(sb), sb.Annotations)
	}
	if Stale(tpl, sb) {
		t.Error("an idle member is stale for its own template")
	}
	tplMeta := tpl.DeepCopy()
	tplMeta.Spec.PodTemplate.ObjectMeta.Labels["new"] = "label"
	if Stale(tplMeta, sb) {
		t.Error("a pod-template metadata edit makes an idle member stale")
	}
	tplImage := tpl.DeepCopy()
	tplImage.Spec.PodTemplate.Spec.Containers[0].Image = "other"
	if !Stale(tplImage, sb) {
		t.Error("an image change does not make an idle member stale")
	}

	if err := Adopt(sb, claim(), tpl); err != nil {
		t.Fatal(err)
	}
	if !podresize.Equal(first(sb), sized("1", "1Gi")) {
		t.Errorf("adopted without claim resources: %v, want the template's 1/1Gi", first(sb))
	}

	c := claim()
	c.Annotations = map[string]string{extensionsv1beta1.CPUAnnotation: "2", extensionsv1beta1.MemoryAnnotation: "3Gi"}
	sb = member()
	if err := Adopt(sb, c, tpl); err != nil {
		t.Fatal(err)
	}
	if !podresize.Equal(first(sb), sized("2", "3Gi")) {
		t.Errorf("adopted with claim resources: %v, want the claim's 2/3Gi", first(sb))
	}

	full := PoolMember(pool, tpl, PoolOptions{})
	if err := Adopt(full, claim(), tpl); err != nil {
		t.Fatal(err)
	}
	if _, marked := full.Annotations[agentsv1beta1.InPlaceResizeAnnotation]; marked || !podresize.Equal(first(full), sized("1", "1Gi")) {
		t.Errorf("a full-size member adopted without claim resources was changed: %v, %v", full.Annotations, first(full))
	}

	cold, err := ColdSandbox(c, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if !podresize.Equal(first(cold), sized("2", "3Gi")) {
		t.Errorf("cold Sandbox: %v, want the claim's 2/3Gi", first(cold))
	}
	if !podresize.Equal(tpl.Spec.PodTemplate.Spec.Containers[0].Resources, sized("1", "1Gi")) {
		t.Error("the template itself was changed")
	}

	bad := claim()
	bad.Annotations = map[string]string{extensionsv1beta1.CPUAnnotation: "lots"}
	if err := Adopt(member(), bad, tpl); err == nil {
		t.Error("Adopt accepted paddock.dev/cpu: lots")
	}
}
