package sandboxtemplate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// TestDefaultIngressAdmitsLabelledClientsOfTheNamespaceOnly: with client labels (the migration
// profile) the default policy admits, besides the router and the controller, the Pods of the
// template's own namespace that carry them, and no Pod of another namespace.
func TestDefaultIngressAdmitsLabelledClientsOfTheNamespaceOnly(t *testing.T) {
	tpl := &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "team-a"}}
	opts := Options{RouterNamespace: "paddock-system", RouterPodLabels: map[string]string{"app": "paddock-router"},
		ControllerNamespace: "paddock-system", ControllerPodLabels: map[string]string{"app.kubernetes.io/name": "paddock-controller"}}
	router := podsIn("paddock-system", opts.RouterPodLabels)
	controller := podsIn("paddock-system", opts.ControllerPodLabels)
	clients := map[string]string{"paddock.dev/sandbox-client": "true"}
	cases := []struct {
		name    string
		clients map[string]string
		want    []networkingv1.NetworkPolicyPeer
	}{
		{name: "default install", want: []networkingv1.NetworkPolicyPeer{router, controller}},
		{name: "migration profile", clients: clients, want: []networkingv1.NetworkPolicyPeer{router, controller,
			{PodSelector: &metav1.LabelSelector{MatchLabels: clients}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := opts
			o.ClientPodLabels = tc.clients
			def, _ := constructPolicy(tpl, o, nil, nil, nil)
			got := def.Spec.Ingress
			if diff := cmp.Diff([]networkingv1.NetworkPolicyIngressRule{{From: tc.want}}, got); diff != "" {
				t.Errorf("ingress (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDefaultEgressAdmitsTheEgressPortsOnlyWhenSet: without --sandbox-egress-proxy-ports the
// default egress is the one deny-ranged rule and there is no policed Pods' policy; with them, one
// more rule admits exactly those ports over TCP and UDP at the nodes' redirect addresses, the
// default policy leaves policed Pods out, and their own policy admits the same ingress and egress
// to those ports there only. A custom
// policy is left as its author wrote it.
func TestDefaultEgressAdmitsTheEgressPortsOnlyWhenSet(t *testing.T) {
	tpl := &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "team-a"}}
	def, policed := constructPolicy(tpl, Options{}, []string{"198.18.0.0/24"}, nil, []string{"198.18.0.1/32"})
	if got := def.Spec.Egress; len(got) != 1 || len(got[0].Ports) != 0 || policed != nil || len(def.Spec.PodSelector.MatchExpressions) != 0 {
		t.Fatalf("without proxy ports: egress %+v, selector %+v, policed Pods' policy %v; want the deny-ranged rule alone for every Pod of the template", got, def.Spec.PodSelector, policed)
	}
	proxyAt := []string{"198.18.0.1/32", "198.18.1.1/32"}
	def, policed = constructPolicy(tpl, Options{EgressProxyPorts: []int32{15001, 15053}}, []string{"198.18.0.0/24"}, nil, proxyAt)
	got := def.Spec.Egress
	if len(got) != 2 {
		t.Fatalf("egress with proxy ports has %d rules; want 2: %+v", len(got), got)
	}
	portsOf := func(rule networkingv1.NetworkPolicyEgressRule) []string {
		var ports []string
		for _, p := range rule.Ports {
			ports = append(ports, string(*p.Protocol)+"/"+p.Port.String())
		}
		return ports
	}
	want := []string{"TCP/15001", "UDP/15001", "TCP/15053", "UDP/15053"}
	wantTo := []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "198.18.0.1/32"}}, {IPBlock: &networkingv1.IPBlock{CIDR: "198.18.1.1/32"}}}
	if diff := cmp.Diff(want, portsOf(got[1])); diff != "" {
		t.Errorf("the egress ports rule (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantTo, got[1].To); diff != "" {
		t.Errorf("the egress ports rule's destinations (-want +got):\n%s", diff)
	}
	leftOut := []metav1.LabelSelectorRequirement{{Key: egress.PolicedLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}
	if diff := cmp.Diff(leftOut, def.Spec.PodSelector.MatchExpressions); diff != "" {
		t.Errorf("the default policy does not leave policed Pods out (-want +got):\n%s", diff)
	}
	if policed == nil {
		t.Fatal("no policy for the template's policed Pods")
	}
	if policed.Name != "tpl-egress-policed-network-policy" || policed.Namespace != "team-a" || !metav1.IsControlledBy(policed, tpl) {
		t.Errorf("policed Pods' policy %s/%s controlled by %v; want team-a/tpl-egress-policed-network-policy controlled by the template", policed.Namespace, policed.Name, metav1.GetControllerOf(policed))
	}
	if sel := policed.Spec.PodSelector.MatchLabels; sel[egress.PolicedLabel] != "true" || sel[agentsv1beta1.SandboxTemplateRefHashLabel] != def.Spec.PodSelector.MatchLabels[agentsv1beta1.SandboxTemplateRefHashLabel] {
		t.Errorf("policed Pods' policy selects %v; want the template's Pods labelled %s=true", sel, egress.PolicedLabel)
	}
	if e := policed.Spec.Egress; len(e) != 1 || !cmp.Equal(wantTo, e[0].To) || !cmp.Equal(want, portsOf(e[0])) {
		t.Errorf("policed Pods' egress = %+v; want the proxy ports at the nodes' redirect addresses alone", e)
	}
	// Where no Node says its pod range, the addresses are unknown: any address, as before.
	if _, anywhere := constructPolicy(tpl, Options{EgressProxyPorts: []int32{15001}}, nil, nil, nil); len(anywhere.Spec.Egress) != 1 || len(anywhere.Spec.Egress[0].To) != 0 {
		t.Errorf("policed Pods' egress with no redirect address known = %+v; want the ports at any address", anywhere.Spec.Egress)
	}
	if !cmp.Equal(def.Spec.Ingress, policed.Spec.Ingress) {
		t.Errorf("policed Pods' ingress %+v differs from the default %+v", policed.Spec.Ingress, def.Spec.Ingress)
	}
	custom := tpl.DeepCopy()
	custom.Spec.NetworkPolicy = &extensionsv1beta1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}}
	def, policed = constructPolicy(custom, Options{EgressProxyPorts: []int32{15001}}, nil, nil, proxyAt)
	if got := def.Spec.Egress; len(got) != 1 || len(got[0].Ports) != 0 || policed != nil {
		t.Errorf("a custom policy's egress = %+v (policed Pods' policy %v); want it unchanged and alone", got, policed)
	}
}
