package sandbox

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/naming"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

func noService(sb *agentsv1beta1.Sandbox) error {
	if sb.Status.Service != "" || sb.Status.ServiceFQDN != "" {
		return fmt.Errorf("status reports service %q / %q, want none", sb.Status.Service, sb.Status.ServiceFQDN)
	}
	return nil
}

func hasService(sb *agentsv1beta1.Sandbox) error {
	if sb.Status.Service != sb.Name || !strings.HasPrefix(sb.Status.ServiceFQDN, sb.Name+"."+sb.Namespace+".svc.") {
		return fmt.Errorf("status reports service %q / %q, want %q", sb.Status.Service, sb.Status.ServiceFQDN, sb.Name)
	}
	return nil
}

// spec.service: true creates, false deletes the owned Service, unset keeps an owned one.
func TestServiceFollowsSpec(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("svc", ns).Service(true).Obj()
	create(t, ctx, sb)
	svc := &corev1.Service{}
	waitSandbox(t, sb, hasService)
	if err := env.Client.Get(ctx, key(sb), svc); err != nil {
		t.Fatal(err)
	}

	// Unset keeps the owned Service, and the Service still counts for readiness.
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.Service = nil })
	pod := waitPod(t, key(sb), nil)
	if _, err := framework.MarkPodReady(ctx, env.Client, key(pod)); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, all(hasService, ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady),
		readyMessage("Pod is Ready; Service Exists")))

	// A port added to the template is not pushed to a Service nobody asked for explicitly.
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) {
		s.Spec.PodTemplate.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}
	})
	nextCompletedPass(t, ctx, sb)
	if err := env.Client.Get(ctx, key(sb), svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 0 {
		t.Errorf("service ports changed with spec.service unset: %v", svc.Spec.Ports)
	}

	// true again repairs drift: ports, selector, label.
	base := svc.DeepCopy()
	svc.Spec.Selector = map[string]string{"app": "other"}
	delete(svc.Labels, agentsv1beta1.SandboxNameHashLabel)
	if err := env.Client.Patch(ctx, svc, mergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.Service = ptr.To(true) })
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, key(sb), svc); err != nil {
			return err
		}
		want := map[string]string{agentsv1beta1.SandboxNameHashLabel: naming.NameHash(sb.Name)}
		if diff := cmp.Diff(want, svc.Spec.Selector); diff != "" {
			return fmt.Errorf("selector (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, svc.Labels); diff != "" {
			return fmt.Errorf("labels (-want +got):\n%s", diff)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" {
			return fmt.Errorf("ports %v, want http", svc.Spec.Ports)
		}
		return nil
	})

	// false deletes it.
	updateSandbox(t, ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.Service = ptr.To(false) })
	waitGone(t, svc)
	waitSandbox(t, sb, all(noService, ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady),
		readyMessage("Pod is Ready")))
}

// Without spec.service no Service is created, and a user's own Service of that name is left alone.
func TestUnsetServiceCreatesNothingAndIgnoresUnowned(t *testing.T) {
	ctx, ns := start(t)
	mine := builder.MakeService("byo", ns).Label(agentsv1beta1.AdoptableLabel, "true").Port("x", 1).Obj()
	create(t, ctx, mine)
	sb := builder.MakeSandbox("byo", ns).Obj()
	other := builder.MakeSandbox("plain", ns).Obj()
	create(t, ctx, sb)
	create(t, ctx, other)
	waitSandbox(t, sb, all(noService, ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady)))
	waitSandbox(t, other, all(noService, ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady)))
	if err := env.Client.Get(ctx, key(other), &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("service for a sandbox without spec.service: err = %v, want NotFound", err)
	}
	got := &corev1.Service{}
	if err := env.Client.Get(ctx, key(mine), got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || got.Labels[agentsv1beta1.SandboxNameHashLabel] != "" {
		t.Errorf("user's service was adopted or relabelled without spec.service: %v %v", got.OwnerReferences, got.Labels)
	}
}

// spec.service: true adopts an unowned headless Service that opted in, and refuses the others.
func TestServiceAdoption(t *testing.T) {
	ctx, ns := start(t)
	cm := builder.ConfigMapOwner("owner", ns)
	create(t, ctx, cm)
	for _, tt := range []struct {
		name    string
		svc     *corev1.Service
		wantErr string
	}{
		{name: "adoptable", svc: builder.MakeService("adoptable", ns).Label(agentsv1beta1.AdoptableLabel, "true").Obj()},
		{name: "tracked", svc: builder.MakeService("tracked", ns).Label(agentsv1beta1.SandboxNameHashLabel, naming.NameHash("tracked")).Obj()},
		{name: "unlabelled", svc: builder.MakeService("unlabelled", ns).Obj(), wantErr: `cannot adopt unowned service "unlabelled"`},
		{name: "clusterip", svc: builder.MakeService("clusterip", ns).ClusterIP("").Port("x", 80).Label(agentsv1beta1.AdoptableLabel, "true").Obj(),
			wantErr: "field is immutable"},
		{name: "foreign", svc: builder.MakeService("foreign", ns).Label(agentsv1beta1.AdoptableLabel, "true").ControlledBy(cm, builder.ConfigMapKind).Obj(),
			wantErr: `service "foreign" is owned by ConfigMap/owner`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			create(t, ctx, tt.svc)
			sb := builder.MakeSandbox(tt.name, ns).Service(true).Port("http", 8080).Obj()
			create(t, ctx, sb)
			if tt.wantErr != "" {
				got := waitSandbox(t, sb, ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonReconcilerError))
				if msg := readyCondition(got).Message; !strings.Contains(msg, tt.wantErr) {
					t.Errorf("Ready message %q does not contain %q", msg, tt.wantErr)
				}
				if err := noService(got); err != nil {
					t.Error(err)
				}
				after := &corev1.Service{}
				if err := env.Client.Get(ctx, key(tt.svc), after); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.svc.OwnerReferences, after.OwnerReferences); diff != "" {
					t.Errorf("refused service's owners changed (-want +got):\n%s", diff)
				}
				return
			}
			got := waitSandbox(t, sb, hasService)
			svc := &corev1.Service{}
			if err := env.Client.Get(ctx, key(sb), svc); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(owner(got), svc.OwnerReferences); diff != "" {
				t.Errorf("adopted service owners (-want +got):\n%s", diff)
			}
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 {
				t.Errorf("adopted service ports = %v, want the derived 8080", svc.Spec.Ports)
			}
			if svc.Spec.Selector[agentsv1beta1.SandboxNameHashLabel] != naming.NameHash(sb.Name) {
				t.Errorf("adopted service selector = %v", svc.Spec.Selector)
			}
		})
	}
}

// A foreign-owned Service is an error even when spec.service is unset.
func TestForeignServiceWithUnsetSpecIsAnError(t *testing.T) {
	ctx, ns := start(t)
	cm := builder.ConfigMapOwner("owner", ns)
	create(t, ctx, cm)
	create(t, ctx, builder.MakeService("taken", ns).ControlledBy(cm, builder.ConfigMapKind).Obj())
	sb := builder.MakeSandbox("taken", ns).Obj()
	create(t, ctx, sb)
	waitSandbox(t, sb, all(ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonReconcilerError), noService))
}

func readyCondition(sb *agentsv1beta1.Sandbox) metav1.Condition {
	for _, c := range sb.Status.Conditions {
		if c.Type == agentsv1beta1.SandboxConditionReady {
			return c
		}
	}
	return metav1.Condition{}
}
