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
