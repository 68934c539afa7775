package sandboxtemplate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
			got := constructPolicy(tpl, o, nil, nil).Spec.Ingress
			if diff := cmp.Diff([]networkingv1.NetworkPolicyIngressRule{{From: tc.want}}, got); diff != "" {
				t.Errorf("ingress (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDefaultEgressAdmitsTheEgressPortsOnlyWhenSet: without --sandbox-egress-proxy-ports the
// default egress is the one deny-ranged rule; with them, one more rule admits exactly those ports
// over TCP and UDP, and a custom policy is left as its author wrote it.
func TestDefaultEgressAdmitsTheEgressPortsOnlyWhenSet(t *testing.T) {
	tpl := &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "team-a"}}
	if got := constructPolicy(tpl, Options{}, []string{"198.18.0.0/24"}, nil).Spec.Egress; len(got) != 1 || len(got[0].Ports) != 0 {
		t.Fatalf("egress without proxy ports = %+v; want the deny-ranged rule alone", got)
	}
	got := constructPolicy(tpl, Options{EgressProxyPorts: []int32{15001, 15053}}, []string{"198.18.0.0/24"}, nil).Spec.Egress
	if len(got) != 2 {
		t.Fatalf("egress with proxy ports has %d rules; want 2: %+v", len(got), got)
	}
	var ports []string
	for _, p := range got[1].Ports {
		ports = append(ports, string(*p.Protocol)+"/"+p.Port.String())
	}
	if diff := cmp.Diff([]string{"TCP/15001", "UDP/15001", "TCP/15053", "UDP/15053"}, ports); diff != "" || len(got[1].To) != 0 {
		t.Errorf("the egress ports rule (-want +got):\n%s\nto: %+v (want any address)", diff, got[1].To)
	}
	custom := tpl.DeepCopy()
	custom.Spec.NetworkPolicy = &extensionsv1beta1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}}
	if got := constructPolicy(custom, Options{EgressProxyPorts: []int32{15001}}, nil, nil).Spec.Egress; len(got) != 1 || len(got[0].Ports) != 0 {
		t.Errorf("a custom policy's egress = %+v; want it unchanged", got)
	}
}
