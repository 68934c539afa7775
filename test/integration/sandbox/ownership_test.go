package sandbox

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/naming"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// A pre-existing Pod is adopted only when it opted in; a foreign one is never touched.
func TestPodOwnership(t *testing.T) {
	ctx, ns := start(t)
	cm := builder.ConfigMapOwner("owner", ns)
	create(t, ctx, cm)
	for _, tt := range []struct {
		name    string
		pod     *corev1.Pod
		wantErr string
	}{
		{name: "adoptable", pod: builder.MakePod("adoptable", ns).Label(agentsv1beta1.AdoptableLabel, "true").Label("keep", "me").Obj()},
		{name: "tracked", pod: builder.MakePod("tracked", ns).Label(agentsv1beta1.SandboxNameHashLabel, naming.NameHash("tracked")).Obj()},
		{name: "unlabelled", pod: builder.MakePod("unlabelled", ns).Obj(), wantErr: `cannot adopt unowned pod "unlabelled"`},
		{name: "foreign", pod: builder.MakePod("foreign", ns).Label(agentsv1beta1.AdoptableLabel, "true").ControlledBy(cm, builder.ConfigMapKind).Obj(),
			wantErr: `pod "foreign" is owned by ConfigMap/owner (UID: ` + string(cm.UID) + `), not by sandbox "foreign"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			create(t, ctx, tt.pod)
			sb := builder.MakeSandbox(tt.name, ns).PodLabel("app", "x").Obj()
			create(t, ctx, sb)
			if tt.wantErr != "" {
				got := waitSandbox(t, sb, all(ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonReconcilerError), podIPs()))
				if msg := readyCondition(got).Message; !strings.Contains(msg, tt.wantErr) {
					t.Errorf("Ready message %q does not contain %q", msg, tt.wantErr)
				}
				if _, ok := got.Annotations[agentsv1beta1.PodNameAnnotation]; ok {
					t.Errorf("pod-name annotation set for a pod the sandbox does not control")
				}
				after := waitPod(t, key(tt.pod), nil)
				if diff := cmp.Diff(tt.pod.OwnerReferences, after.OwnerReferences); diff != "" {
					t.Errorf("refused pod's owners changed (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.pod.Labels, after.Labels); diff != "" {
					t.Errorf("refused pod's labels changed (-want +got):\n%s", diff)
				}
				return
			}
			got := waitSandbox(t, sb, ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady))
			pod := waitPod(t, key(tt.pod), func(p *corev1.Pod) error {
				if p.Labels["app"] != "x" {
					return fmt.Errorf("adopted pod lacks the template label: %v", p.Labels)
				}
				return nil
			})
			if diff := cmp.Diff(owner(got), pod.OwnerReferences); diff != "" {
				t.Errorf("adopted pod owners (-want +got):\n%s", diff)
			}
			if pod.UID != tt.pod.UID {
				t.Errorf("pod replaced instead of adopted")
			}
			if tt.name == "adoptable" && (pod.Labels["keep"] != "me" || pod.Labels[agentsv1beta1.AdoptableLabel] != "true") {
				t.Errorf("adoption dropped the pod's own labels: %v", pod.Labels)
			}
		})
	}
}

// The pod-name annotation locates a Pod named differently from its Sandbox.
func TestPodNameAnnotation(t *testing.T) {
	ctx, ns := start(t)
	pod := builder.MakePod("warm-abcde", ns).Label(agentsv1beta1.AdoptableLabel, "true").Obj()
	create(t, ctx, pod)
	sb := builder.MakeSandbox("renamed", ns).Annotation(agentsv1beta1.PodNameAnnotation, "warm-abcde").Obj()
	create(t, ctx, sb)
	waitPod(t, key(pod), func(p *corev1.Pod) error {
		if metav1.GetControllerOf(p) == nil {
			return fmt.Errorf("not adopted yet")
		}
		return nil
	})
	if err := env.Client.Get(ctx, key(sb), &corev1.Pod{}); err == nil {
		t.Errorf("a pod named after the sandbox was created next to the annotated one")
	}

	// When the annotated Pod goes, the stale annotation is dropped and a Pod named after the
	// Sandbox replaces it.
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitPod(t, key(sb), nil)
	waitSandbox(t, sb, func(s *agentsv1beta1.Sandbox) error {
		if got := s.Annotations[agentsv1beta1.PodNameAnnotation]; got != "renamed" {
			return fmt.Errorf("pod-name annotation = %q, want %q", got, "renamed")
		}
		return nil
	})
}

// PVCs: created when missing, adopted when they opted in, refused otherwise; and a PVC problem
// does not stop the Pod.
func TestPVCOwnership(t *testing.T) {
	ctx, ns := start(t)
	cm := builder.ConfigMapOwner("owner", ns)
	create(t, ctx, cm)
	for _, tt := range []struct {
		name    string
		pvc     *corev1.PersistentVolumeClaim
		wantErr string
	}{
		{name: "adoptable", pvc: builder.MakePVC("data-adoptable", ns, "1Gi").Label(agentsv1beta1.AdoptableLabel, "true").Obj()},
		{name: "tracked", pvc: builder.MakePVC("data-tracked", ns, "1Gi").Label(agentsv1beta1.SandboxNameHashLabel, naming.NameHash("tracked")).Obj()},
		{name: "unlabelled", pvc: builder.MakePVC("data-unlabelled", ns, "1Gi").Obj(), wantErr: `cannot adopt unowned PVC "data-unlabelled"`},
		{name: "foreign", pvc: builder.MakePVC("data-foreign", ns, "1Gi").ControlledBy(cm, builder.ConfigMapKind).Obj(),
			wantErr: `PVC "data-foreign" is owned by ConfigMap/owner`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			create(t, ctx, tt.pvc)
			sb := builder.MakeSandbox(tt.name, ns).VolumeClaim("data", "2Gi").Obj()
			create(t, ctx, sb)
			waitPod(t, key(sb), nil) // the Pod is created whatever happens to the claim
			if tt.wantErr != "" {
				// A first pass on a cache that does not show the PVC yet reports its create's
				// AlreadyExists; the retry reports why the PVC is refused.
				waitSandbox(t, sb, func(s *agentsv1beta1.Sandbox) error {
					if err := ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonReconcilerError)(s); err != nil {
						return err
					}
					if msg := readyCondition(s).Message; !strings.Contains(msg, tt.wantErr) {
						return fmt.Errorf("Ready message %q does not contain %q", msg, tt.wantErr)
					}
					return nil
				})
				return
			}
			got := waitSandbox(t, sb, ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady))
			pvc := &corev1.PersistentVolumeClaim{}
			if err := env.Client.Get(ctx, key(tt.pvc), pvc); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(owner(got), pvc.OwnerReferences); diff != "" {
				t.Errorf("adopted PVC owners (-want +got):\n%s", diff)
			}
			if size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; size.String() != "1Gi" {
				t.Errorf("adopted PVC spec changed: size %s", size.String())
			}
		})
	}
}

// Two Pods controlled by one Sandbox stop it from acting, with one Warning event.
func TestMultiplePods(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("twins", ns).Service(true).Obj()
	create(t, ctx, sb)
	first := waitPod(t, key(sb), nil)
	if _, err := framework.MarkPodReady(ctx, env.Client, key(first)); err != nil {
		t.Fatal(err)
	}
	got := waitSandbox(t, sb, ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady))
	extra := builder.MakePod("twins-extra", ns).Label(agentsv1beta1.SandboxNameHashLabel, naming.NameHash("twins")).
		ControlledBy(got, agentsv1beta1.GroupVersion.WithKind("Sandbox")).Obj()
	create(t, ctx, extra)

	wantMsg := "multiple Pods (2) are controlled by this Sandbox; refusing to choose or create a Pod"
	waitSandbox(t, sb, all(ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMultiplePods), readyMessage(wantMsg), podIPs(),
		condition(agentsv1beta1.SandboxConditionPodScheduled, metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown),
		condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionFalse, agentsv1beta1.SandboxReasonNotSuspended)))
	framework.Eventually(t, func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == agentsv1beta1.SandboxReasonMultiplePods && e.Type == corev1.EventTypeWarning &&
				e.Regarding.Name == "twins" && e.Action == "Reconciling" && e.Note == wantMsg {
				return nil
			}
		}
		return fmt.Errorf("no MultiplePods warning event among %d events", len(list.Items))
	})
	// Nothing is decided while ambiguous: no more events, no deletions, the Service is left alone.
	pass := nextCompletedPass(t, ctx, sb)
	if len(pass) != 0 {
		t.Errorf("a pass with several owned pods wrote %v, want nothing", pass)
	}
	if n := recorder.Count(ns, agentsv1beta1.SandboxReasonMultiplePods); n != 1 {
		t.Errorf("%d MultiplePods events, want 1 (only on the transition)", n)
	}

	// Suspended while ambiguous: state unknown, nothing deleted.
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	waitSandbox(t, sb, condition(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodStateUnknown))
	for _, p := range []*corev1.Pod{first, extra} {
		if got := waitPod(t, key(p), nil); !got.DeletionTimestamp.IsZero() {
			t.Errorf("pod %s deleted while ambiguous", p.Name)
		}
	}
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning })

	// Resolving the ambiguity lets the Sandbox recover.
	if err := env.Client.Delete(ctx, extra); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady))
}
