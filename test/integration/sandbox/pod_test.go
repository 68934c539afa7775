package sandbox

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/naming"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// A Sandbox gets one Pod named after it, with its hostname, the user's pod metadata minus
// reserved keys, the claim volumes, and a controller reference; plus PVCs and a headless Service.
func TestSandboxCreatesPodPVCAndService(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("web", ns).
		Label(agentsv1beta1.CreatedByLabel, "go-client").
		Label("team", "not-propagated").
		PodLabel("app", "demo").
		PodLabel(agentsv1beta1.AdoptableLabel, "true").
		PodAnnotation("note", "n").
		PodAnnotation(agentsv1beta1.TraceContextAnnotation, "{}").
		PodVolume("data").PodVolume("scratch").
		VolumeClaim("data", "1Gi").
		Port("http", 8080).SidecarPort("proxy", 15001).
		Service(true).Obj()
	create(t, ctx, sb)
	hash := naming.NameHash("web")

	pod := waitPod(t, key(sb), nil)
	want := pod.DeepCopy()
	want.Labels = map[string]string{"app": "demo", agentsv1beta1.SandboxNameHashLabel: hash, agentsv1beta1.CreatedByLabel: "go-client"}
	want.Annotations = map[string]string{"note": "n",
		agentsv1beta1.PropagatedLabelsAnnotation: "app", agentsv1beta1.PropagatedAnnotationsAnnotation: "note"}
	want.Spec.Hostname = "web"
	want.OwnerReferences = owner(waitSandbox(t, sb, func(*agentsv1beta1.Sandbox) error { return nil }))
	if diff := cmp.Diff(want.ObjectMeta, pod.ObjectMeta); diff != "" {
		t.Errorf("pod metadata (-want +got):\n%s", diff)
	}
	if pod.Spec.Hostname != "web" {
		t.Errorf("pod hostname = %q, want the sandbox name", pod.Spec.Hostname)
	}
	var volumes []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			volumes = append(volumes, v.Name+"=pvc:"+v.PersistentVolumeClaim.ClaimName)
		case v.EmptyDir != nil:
			volumes = append(volumes, v.Name+"=emptyDir")
		}
	}
	if diff := cmp.Diff([]string{"scratch=emptyDir", "data=pvc:data-web"}, volumes); diff != "" {
		t.Errorf("pod volumes (-want +got):\n%s", diff)
	}

	got := waitSandbox(t, sb, all(
		ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady),
		readyMessage("Pod exists with phase: Pending; Service Exists"),
		condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionFalse, agentsv1beta1.SandboxReasonNotSuspended),
		condition(agentsv1beta1.SandboxConditionPodScheduled, metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown),
	))
	if err := builder.LacksCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionFinished); err != nil {
		t.Error(err)
	}
	if got.Annotations[agentsv1beta1.PodNameAnnotation] != "web" {
		t.Errorf("sandbox annotation %s = %q, want %q", agentsv1beta1.PodNameAnnotation, got.Annotations[agentsv1beta1.PodNameAnnotation], "web")
	}
	wantStatus := agentsv1beta1.SandboxStatus{
		Service: "web", ServiceFQDN: "web." + ns + ".svc.paddock.test",
		LabelSelector: agentsv1beta1.SandboxNameHashLabel + "=" + hash,
	}
	if diff := cmp.Diff(wantStatus, got.Status, ignoreConditions); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	for _, c := range got.Status.Conditions {
		if c.ObservedGeneration != got.Generation {
			t.Errorf("condition %s has observedGeneration %d, want %d", c.Type, c.ObservedGeneration, got.Generation)
		}
	}

	pvc := &corev1.PersistentVolumeClaim{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-web"}, pvc); err != nil {
		t.Fatalf("reading PVC data-web: %v", err)
	}
	if diff := cmp.Diff(map[string]string{agentsv1beta1.SandboxNameHashLabel: hash}, pvc.Labels); diff != "" {
		t.Errorf("PVC labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(owner(got), pvc.OwnerReferences); diff != "" {
		t.Errorf("PVC owner references (-want +got):\n%s", diff)
	}
	if size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; size.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("PVC size = %s, want 1Gi", size.String())
	}

	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, key(sb), svc); err != nil {
		t.Fatalf("reading service: %v", err)
	}
	wantPorts := []corev1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080, TargetPort: intstr.FromInt32(8080)},
		{Name: "proxy", Protocol: corev1.ProtocolTCP, Port: 15001, TargetPort: intstr.FromInt32(15001)},
	}
	if diff := cmp.Diff(wantPorts, svc.Spec.Ports); diff != "" {
		t.Errorf("service ports (-want +got):\n%s", diff)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("service clusterIP = %q, want None", svc.Spec.ClusterIP)
	}
	if diff := cmp.Diff(map[string]string{agentsv1beta1.SandboxNameHashLabel: hash}, svc.Spec.Selector); diff != "" {
		t.Errorf("service selector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(owner(got), svc.OwnerReferences); diff != "" {
		t.Errorf("service owner references (-want +got):\n%s", diff)
	}

	// The kubelet reports progress; the Sandbox follows.
	if _, err := framework.MarkPodRunning(ctx, env.Client, key(pod), framework.PodIP); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, all(ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady),
		readyMessage("Pod is Running but not Ready; Service Exists"), podIPs(framework.PodIP)))
	if _, err := framework.MarkPodReady(ctx, env.Client, key(pod)); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, all(ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady),
		readyMessage("Pod is Ready; Service Exists"), podIPs(framework.PodIP),
		condition(agentsv1beta1.SandboxConditionPodScheduled, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodScheduled)))
}

func podIPs(ips ...string) func(*agentsv1beta1.Sandbox) error {
	return func(sb *agentsv1beta1.Sandbox) error {
		if diff := cmp.Diff(ips, sb.Status.PodIPs); diff != "" {
			return fmt.Errorf("podIPs (-want +got):\n%s", diff)
		}
		return nil
	}
}

// A Pod that is Ready without addresses is not yet usable.
func TestReadyNeedsPodIPs(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("noip", ns).Obj()
	create(t, ctx, sb)
	pod := waitPod(t, key(sb), nil)
	if _, err := framework.UpdatePodStatus(ctx, env.Client, key(pod), func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		framework.SetPodCondition(p, corev1.PodReady, corev1.ConditionTrue, "")
	}); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, all(ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady),
		readyMessage("Pod is Ready but has no podIPs yet")))
}

// A Pod template's hostname is kept; a Sandbox name that is not a DNS label leaves it unset.
func TestHostname(t *testing.T) {
	ctx, ns := start(t)
	custom := builder.MakeSandbox("custom", ns).Hostname("box").Obj()
	dotted := builder.MakeSandbox("a.b", ns).Obj()
	create(t, ctx, custom)
	create(t, ctx, dotted)
	if h := waitPod(t, key(custom), nil).Spec.Hostname; h != "box" {
		t.Errorf("hostname = %q, want the template's %q", h, "box")
	}
	if h := waitPod(t, key(dotted), nil).Spec.Hostname; h != "" {
		t.Errorf("hostname of a pod named a.b = %q, want empty (not a DNS label)", h)
	}
}

// A Pod deleted behind the controller's back is recreated from the current template.
func TestDeletedPodIsRecreated(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("phoenix", ns).Obj()
	create(t, ctx, sb)
	first := waitPod(t, key(sb), nil)
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.PodTemplate.Spec.Containers[0].Image = "registry.invalid/v2" })
	if err := env.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := waitPod(t, key(sb), func(p *corev1.Pod) error {
		if p.UID == first.UID {
			return fmt.Errorf("still the first pod")
		}
		return nil
	})
	if img := second.Spec.Containers[0].Image; img != "registry.invalid/v2" {
		t.Errorf("recreated pod image = %q, want the current template's", img)
	}
	waitSandbox(t, sb, condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionFalse, agentsv1beta1.SandboxReasonNotSuspended))
}

// The spec of a running Pod is never changed; a template edit waits for the next Pod.
func TestTemplateEditDoesNotTouchPodSpec(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("stable", ns).Obj()
	create(t, ctx, sb)
	pod := waitPod(t, key(sb), nil)
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) {
		s.Spec.PodTemplate.Spec.Containers[0].Image = "registry.invalid/v2"
		s.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{"rev": "2"}
	})
	// The metadata follows the template; the image does not.
	got := waitPod(t, key(sb), func(p *corev1.Pod) error {
		if p.Labels["rev"] != "2" {
			return fmt.Errorf("labels %v lack rev=2", p.Labels)
		}
		return nil
	})
	if got.UID != pod.UID || got.Spec.Containers[0].Image != builder.DefaultImage {
		t.Errorf("pod replaced or its spec changed: uid %s→%s image %q", pod.UID, got.UID, got.Spec.Containers[0].Image)
	}
	// Every condition reports the generation it was computed from.
	waitSandbox(t, sb, func(s *agentsv1beta1.Sandbox) error {
		if s.Generation < 2 {
			return fmt.Errorf("generation %d, want the edit to have bumped it", s.Generation)
		}
		for _, c := range s.Status.Conditions {
			if c.ObservedGeneration != s.Generation {
				return fmt.Errorf("condition %s observedGeneration %d, want %d", c.Type, c.ObservedGeneration, s.Generation)
			}
		}
		return nil
	})
}

// Succeeded and Failed Pods are reported, never replaced or deleted.
func TestTerminalPodIsReportedNotReplaced(t *testing.T) {
	for _, tt := range []struct {
		phase  corev1.PodPhase
		reason string
	}{
		{corev1.PodSucceeded, agentsv1beta1.SandboxReasonPodSucceeded},
		{corev1.PodFailed, agentsv1beta1.SandboxReasonPodFailed},
	} {
		t.Run(string(tt.phase), func(t *testing.T) {
			ctx, ns := start(t)
			sb := builder.MakeSandbox("job", ns).Obj()
			create(t, ctx, sb)
			pod := waitPod(t, key(sb), nil)
			if _, err := framework.MarkPodReady(ctx, env.Client, key(pod)); err != nil {
				t.Fatal(err)
			}
			waitSandbox(t, sb, ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady))
			if _, err := framework.SetPodPhase(ctx, env.Client, key(pod), tt.phase); err != nil {
				t.Fatal(err)
			}
			waitSandbox(t, sb, all(ready(metav1.ConditionFalse, tt.reason),
				condition(agentsv1beta1.SandboxConditionFinished, metav1.ConditionTrue, tt.reason)))
			nextCompletedPass(t, ctx, sb)
			got := waitPod(t, key(sb), nil)
			if got.UID != pod.UID || !got.DeletionTimestamp.IsZero() {
				t.Errorf("terminal pod was replaced or deleted (uid %s→%s, deletionTimestamp %v)", pod.UID, got.UID, got.DeletionTimestamp)
			}
		})
	}
}

// A terminating owned Pod is waited for; no second Pod is created next to it.
func TestTerminatingPodIsWaitedFor(t *testing.T) {
	ctx, ns := start(t)
	const finalizer = "test.paddock.dev/hold"
	sb := builder.MakeSandbox("slow", ns).Obj()
	create(t, ctx, sb)
	pod := waitPod(t, key(sb), nil)
	base := pod.DeepCopy()
	pod.Finalizers = []string{finalizer}
	if err := env.Client.Patch(ctx, pod, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitPod(t, key(sb), func(p *corev1.Pod) error {
		if p.DeletionTimestamp.IsZero() {
			return fmt.Errorf("not terminating yet")
		}
		return nil
	})
	pass := nextCompletedPass(t, ctx, sb)
	for _, op := range pass {
		if op == "create Pod" || op == "create Pod (error)" {
			t.Errorf("a pod was created while the old one terminates: %v", pass)
		}
	}
	forceDelete(t, ctx, pod)
	waitPod(t, key(sb), func(p *corev1.Pod) error {
		if p.UID == pod.UID {
			return fmt.Errorf("still the terminating pod")
		}
		return nil
	})
}

// A Ready Pod that is deleted (evicted, drained, deleted by hand) stops counting as Ready as soon
// as its deletion starts, though it still reports Ready: the Sandbox is not Ready until its
// replacement is.
func TestTerminatingReadyPodIsNotReady(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("evicted", ns).Obj()
	pod := runOnNode(t, ctx, sb)
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, all(ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady),
		readyMessage("Pod is terminating; a new Pod replaces it once it is gone")))
	finishDeletion(t, ctx, sb, pod)
}

var ignoreConditions = cmpIgnoreConditions()
