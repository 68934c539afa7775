package sandboxtemplate

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
)

// namespaceNameLabel is set by Kubernetes on every namespace to the namespace's name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// PolicyName is the name of a template's NetworkPolicy.
func PolicyName(templateName string) string { return templateName + "-network-policy" }

// PolicedPolicyName is the name of the NetworkPolicy of a template's policed Pods.
func PolicedPolicyName(templateName string) string {
	return templateName + "-egress-policed-network-policy"
}

// constructPolicy is the NetworkPolicy a Managed template wants. The default ingress admits the
// router (the way in for clients) and the controller (claim settings and idle activity, which it
// asks sandboxd for); the default egress is any address but the deny ranges (see package egress):
// sandboxes reach neither the cluster (DNS included) nor cloud metadata.
//
// With egress proxy ports (paddock-egress installed) it also returns the policy of the template's
// policed Pods (egress.PolicedLabel), which the first leaves out: the same ingress, and egress to
// the proxy ports only. A policed Pod's allowed traffic reaches those ports after the node's
// redirect; one the node does not redirect yet (paddock-egress down or behind) reaches nothing.
// The egress ports are admitted at proxyAt (the nodes' addresses where the redirect lands,
// egress.RedirectAddresses) only, so an unredirected Pod reaches no other host on them; nil
// proxyAt, when the controller cannot know those addresses, admits them at any address.
// policed is nil otherwise, and for a custom spec.networkPolicy, which applies as written.
func constructPolicy(tpl *extensionsv1beta1.SandboxTemplate, opts Options, deny4, deny6, proxyAt []string) (def, policed *networkingv1.NetworkPolicy) {
	spec := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
			agentsv1beta1.SandboxTemplateRefHashLabel: blueprint.TemplateRefHash(tpl.Name),
		}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
	}
	if custom := tpl.Spec.NetworkPolicy; custom != nil {
		spec.Ingress, spec.Egress = custom.Ingress, custom.Egress
		return newPolicy(tpl, PolicyName(tpl.Name), spec), nil
	}
	from := []networkingv1.NetworkPolicyPeer{
		podsIn(opts.RouterNamespace, opts.RouterPodLabels),
		podsIn(opts.ControllerNamespace, opts.ControllerPodLabels),
	}
	if len(opts.ClientPodLabels) > 0 {
		// No namespace selector: only Pods of the sandboxes' own namespace.
		from = append(from, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: maps.Clone(opts.ClientPodLabels)}})
	}
	spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: from}}
	spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: deny4}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: deny6}},
	}}}
	ports := egressProxyPorts(opts.EgressProxyPorts)
	if len(ports) == 0 {
		return newPolicy(tpl, PolicyName(tpl.Name), spec), nil
	}
	// A Pod that becomes policed at claim time may be redirected before it is relabelled: the
	// default policy admits the egress ports too.
	var to []networkingv1.NetworkPolicyPeer
	for _, cidr := range proxyAt {
		to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
	}
	spec.Egress = append(spec.Egress, networkingv1.NetworkPolicyEgressRule{Ports: ports, To: to})
	policedSpec := *spec.DeepCopy()
	policedSpec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: ports, To: slices.Clone(to)}}
	policedSpec.PodSelector.MatchLabels[egress.PolicedLabel] = "true"
	spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: egress.PolicedLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}
	return newPolicy(tpl, PolicyName(tpl.Name), spec), newPolicy(tpl, PolicedPolicyName(tpl.Name), policedSpec)
}

func newPolicy(tpl *extensionsv1beta1.SandboxTemplate, name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       tpl.Namespace,
			OwnerReferences: []metav1.OwnerReference{blueprint.ControllerRef("SandboxTemplate", tpl)},
		},
		Spec: spec,
	}
}

// egressProxyPorts are ports, each over TCP and UDP.
func egressProxyPorts(ports []int32) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for _, p := range ports {
		for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP} {
			out = append(out, networkingv1.NetworkPolicyPort{Protocol: ptr.To(proto), Port: ptr.To(intstr.FromInt32(p))})
		}
	}
	return out
}

// podsIn selects the Pods with labels in namespace.
func podsIn(namespace string, labels map[string]string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{namespaceNameLabel: namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(labels)},
	}
}
