package blueprint

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// PublicNameservers replace cluster DNS in secure-by-default sandboxes: the default
// NetworkPolicy blocks private ranges, cluster DNS included, and public resolvers cannot
// enumerate cluster services.
var PublicNameservers = []string{"8.8.8.8", "1.1.1.1"}

// SecureByDefault reports whether the template relies on the default NetworkPolicy: managed,
// with no custom rules.
func SecureByDefault(spec *extensionsv1beta1.SandboxTemplateSpec) bool {
	managed := spec.NetworkPolicyManagement == "" || spec.NetworkPolicyManagement == extensionsv1beta1.NetworkPolicyManagementManaged
	return managed && spec.NetworkPolicy == nil
}

// ApplySecureDefaults hardens the pod spec of a Sandbox made from a template: no service
// account token unless the template asks for one, and, under the default NetworkPolicy, public
// DNS unless the template chose a DNS policy.
func ApplySecureDefaults(tpl *extensionsv1beta1.SandboxTemplateSpec, spec *corev1.PodSpec) {
	if spec.AutomountServiceAccountToken == nil {
		spec.AutomountServiceAccountToken = ptr.To(false)
	}
	if SecureByDefault(tpl) && spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSNone
		spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: append([]string(nil), PublicNameservers...)}
	}
}
