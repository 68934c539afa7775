package extensions

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestTemplateDefaultNetworkPolicy proves the label on the template and the secure default
// policy, with the router and controller selections taken from the reconciler's options.
func TestTemplateDefaultNetworkPolicy(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	create(t, builder.MakeTemplate("tpl", ns).Obj())

	framework.Eventually(t, func(ctx context.Context) error {
		tpl, err := get(ctx, ns, "tpl", &extensionsv1beta1.SandboxTemplate{})
		if err != nil {
			return err
		}
		if got, want := tpl.Labels[agentsv1beta1.SandboxTemplateRefHashLabel], blueprint.TemplateRefHash("tpl"); got != want {
			return fmt.Errorf("template-ref-hash label = %q, want %q", got, want)
		}
		np, err := get(ctx, ns, sandboxtemplate.PolicyName("tpl"), &networkingv1.NetworkPolicy{})
		if err != nil {
			return err
		}
		want := networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{agentsv1beta1.SandboxTemplateRefHashLabel: blueprint.TemplateRefHash("tpl")}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": testRouterNamespace}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: testRouterLabels},
			}, {
				// The controller asks sandboxd for claim settings and idle activity.
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": testControllerNamespace}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: testControllerLabels},
			}}}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: []string{"fc00::/7", "fe80::/10"}}},
			}}},
		}
		if diff := cmp.Diff(want, np.Spec); diff != "" {
			return fmt.Errorf("policy spec (-want +got):\n%s", diff)
		}
		if ref := metav1.GetControllerOf(np); ref == nil || ref.UID != tpl.UID {
			return fmt.Errorf("policy controller = %v, want the template", ref)
		}
		return nil
	})
}

// TestTemplateCustomAndUnmanagedPolicy proves custom rules replace the default, a drifted
// policy is repaired, and switching to Unmanaged deletes the controlled policy.
func TestTemplateCustomAndUnmanagedPolicy(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	port, tcp := intstr.FromInt32(8080), corev1.ProtocolTCP
	custom := extensionsv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}}
	create(t, builder.MakeTemplate("tpl", ns).NetworkPolicy(custom).Obj())
	name := sandboxtemplate.PolicyName("tpl")

	wantCustom := func(ctx context.Context) error {
		np, err := get(ctx, ns, name, &networkingv1.NetworkPolicy{})
		if err != nil {
			return err
		}
		if diff := cmp.Diff(custom.Ingress, np.Spec.Ingress); diff != "" {
			return fmt.Errorf("ingress (-want +got):\n%s", diff)
		}
		if len(np.Spec.Egress) != 0 {
			return fmt.Errorf("egress = %v, want none (deny all)", np.Spec.Egress)
		}
		return nil
	}
	framework.Eventually(t, wantCustom)

	// Someone edits the policy: the template's rules come back.
	np, err := get(context.Background(), ns, name, &networkingv1.NetworkPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	np.Spec.Ingress = nil
	if err := env.Client.Update(context.Background(), np); err != nil {
		t.Fatalf("editing policy: %v", err)
	}
	framework.Eventually(t, wantCustom)

	tpl, err := get(context.Background(), ns, "tpl", &extensionsv1beta1.SandboxTemplate{})
	if err != nil {
		t.Fatal(err)
	}
	tpl.Spec.NetworkPolicyManagement = extensionsv1beta1.NetworkPolicyManagementUnmanaged
	if err := env.Client.Update(context.Background(), tpl); err != nil {
		t.Fatalf("switching to Unmanaged: %v", err)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		_, err := get(ctx, ns, name, &networkingv1.NetworkPolicy{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("policy still exists (err %v)", err)
	})
}

// TestTemplateNeverOverwritesForeignPolicy proves a same-named policy the template does not
// control is left as it is, and Unmanaged does not delete it either.
func TestTemplateNeverOverwritesForeignPolicy(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	foreign := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: sandboxtemplate.PolicyName("tpl"), Namespace: ns},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	create(t, foreign)
	create(t, builder.MakeTemplate("tpl", ns).Obj())
	// The template says why its sandboxes are not isolated as it describes.
	framework.Eventually(t, func(ctx context.Context) error {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == sandboxtemplate.ReasonPolicyNotControlled && e.InvolvedObject.Name == "tpl" {
				return nil
			}
		}
		return fmt.Errorf("no %s event", sandboxtemplate.ReasonPolicyNotControlled)
	})
	framework.Eventually(t, func(ctx context.Context) error {
		// The template controller's failed attempts are retried with backoff; none may write.
		for _, w := range controllers(t).writesOf("template").InNamespace(ns) {
			if w.Kind == "NetworkPolicy" {
				return fmt.Errorf("template controller wrote the foreign policy: %v", w)
			}
		}
		np, err := get(ctx, ns, foreign.Name, &networkingv1.NetworkPolicy{})
		if err != nil {
			return err
		}
		if diff := cmp.Diff(foreign.Spec, np.Spec); diff != "" {
			return fmt.Errorf("foreign policy changed (-want +got):\n%s", diff)
		}
		return nil
	})
}

// TestTemplateInvalidPolicyIsTerminal proves that a policy the API server refuses (a CIDR the
// template's schema admits but a NetworkPolicy's does not) is a Warning event naming
// spec.networkPolicy and a terminal error, which controller-runtime counts and does not retry,
// and that fixing the template brings the policy.
func TestTemplateInvalidPolicyIsTerminal(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	terminalBefore := terminalErrors(t, "sandboxtemplate")
	broken := func(cidr string) extensionsv1beta1.NetworkPolicySpec {
		return extensionsv1beta1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}},
		}}}
	}
	create(t, builder.MakeTemplate("tpl", ns).NetworkPolicy(broken("not-a-cidr")).Obj())
	framework.Eventually(t, func(ctx context.Context) error {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == sandboxtemplate.ReasonPolicyInvalid && e.InvolvedObject.Name == "tpl" {
				for _, want := range []string{"fix spec.networkPolicy", "spec.egress[0].to[0].ipBlock.cidr"} {
					if !strings.Contains(e.Message, want) {
						return fmt.Errorf("event message %q does not contain %q", e.Message, want)
					}
				}
				return nil
			}
		}
		return fmt.Errorf("no %s event", sandboxtemplate.ReasonPolicyInvalid)
	})
	framework.Eventually(t, func(context.Context) error {
		if n := terminalErrors(t, "sandboxtemplate"); n <= terminalBefore {
			return fmt.Errorf("%v terminal reconcile errors of the template controller, want more than %v", n, terminalBefore)
		}
		return nil
	})

	tpl, err := get(context.Background(), ns, "tpl", &extensionsv1beta1.SandboxTemplate{})
	if err != nil {
		t.Fatal(err)
	}
	fixed := broken("198.18.0.0/15")
	tpl.Spec.NetworkPolicy = &fixed
	if err := env.Client.Update(context.Background(), tpl); err != nil {
		t.Fatalf("fixing the template: %v", err)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		np, err := get(ctx, ns, sandboxtemplate.PolicyName("tpl"), &networkingv1.NetworkPolicy{})
		if err != nil {
			return err
		}
		if diff := cmp.Diff(fixed.Egress, np.Spec.Egress); diff != "" {
			return fmt.Errorf("egress (-want +got):\n%s", diff)
		}
		return nil
	})
}

// terminalErrors reads controller-runtime's count of terminal reconcile errors of a controller
// from this process's metrics registry, where the test's managers register it.
func terminalErrors(t *testing.T, controller string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_terminal_reconcile_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
