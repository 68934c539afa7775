package sandboxtemplate

import (
	"maps"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
)

// namespaceNameLabel is set by Kubernetes on every namespace to the namespace's name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// Egress of the secure default: any public address. Private, link-local and unique-local ranges
// are excluded, so sandboxes reach neither the cluster (DNS included) nor cloud metadata.
var (
	publicIPv4Except = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}
	publicIPv6Except = []string{"fc00::/7", "fe80::/10"}
)

// PolicyName is the name of a template's NetworkPolicy.
func PolicyName(templateName string) string { return templateName + "-network-policy" }

// constructPolicy is the NetworkPolicy a Managed template wants.
func constructPolicy(tpl *extensionsv1beta1.SandboxTemplate, opts Options) *networkingv1.NetworkPolicy {
	spec := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
			agentsv1beta1.SandboxTemplateRefHashLabel: blueprint.TemplateRefHash(tpl.Name),
		}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
	}
	if custom := tpl.Spec.NetworkPolicy; custom != nil {
		spec.Ingress, spec.Egress = custom.Ingress, custom.Egress
	} else {
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{namespaceNameLabel: opts.RouterNamespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(opts.RouterPodLabels)},
		}}}}
		spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: publicIPv4Except}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: publicIPv6Except}},
		}}}
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PolicyName(tpl.Name),
			Namespace: tpl.Namespace,
			OwnerReferences: []metav1.OwnerReference{
				blueprint.ControllerRef("SandboxTemplate", tpl),
			},
		},
		Spec: spec,
	}
	return np
}
