package blueprint

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
)

// PublicNameservers replace cluster DNS in secure-by-default sandboxes: the default
// NetworkPolicy blocks private ranges, cluster DNS included, and public resolvers cannot
// enumerate cluster services. The controller sets it once at start from --sandbox-nameservers
// (the local dev cluster names its internet stand-in's resolver there).
var PublicNameservers = []string{"8.8.8.8", "1.1.1.1"}

// maxNameservers is the most nameservers a Pod's dnsConfig may hold.
const maxNameservers = 3

// ValidateNameservers checks --sandbox-nameservers: one to three IP addresses.
func ValidateNameservers(addrs []string) error {
	if len(addrs) == 0 || len(addrs) > maxNameservers {
		return fmt.Errorf("--sandbox-nameservers: give 1 to %d IP addresses, not %d", maxNameservers, len(addrs))
	}
	for _, a := range addrs {
		if _, err := netip.ParseAddr(a); err != nil {
			return fmt.Errorf("--sandbox-nameservers: %q is not an IP address (a Pod's dnsConfig takes addresses, not names)", a)
		}
	}
	return nil
}

// SecureByDefault reports whether the template relies on the default NetworkPolicy: managed,
// with no custom rules.
func SecureByDefault(spec *extensionsv1beta1.SandboxTemplateSpec) bool {
	managed := spec.NetworkPolicyManagement == "" || spec.NetworkPolicyManagement == extensionsv1beta1.NetworkPolicyManagementManaged
	return managed && spec.NetworkPolicy == nil
}

// RunsSandboxd reports whether the template's runtime is sandboxd: RuntimeAnnotation says so, or
// its pod template has sandboxd injected (InjectSandboxdAnnotation), whose members must start
// locked just the same.
func RunsSandboxd(tpl *extensionsv1beta1.SandboxTemplate) bool {
	return tpl.Annotations[extensionsv1beta1.RuntimeAnnotation] == extensionsv1beta1.RuntimeSandboxd ||
		InjectsSandboxd(tpl.Spec.PodTemplate.ObjectMeta)
}

// LockUntilClaimed starts every container of a sandboxd pool member locked
// (SANDBOXD_REQUIRE_CLAIM=true): until the controller binds it to a claim with the control
// token, sandboxd serves nobody else, so nothing can be planted in an unclaimed member.
func LockUntilClaimed(spec *corev1.PodSpec) {
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == sandboxd.RequireClaimEnv })
		c.Env = append(c.Env, corev1.EnvVar{Name: sandboxd.RequireClaimEnv, Value: "true"})
	}
}

// Unlock removes the lock from a pod spec: a claimed Sandbox whose Pod is created again (after
// a resume, an eviction) must not start locked, since the claim was bound before and nothing
// sends claim settings to the new Pod.
func Unlock(spec *corev1.PodSpec) {
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == sandboxd.RequireClaimEnv })
	}
}

// LockedUntilClaimed reports whether a Sandbox's pod spec starts sandboxd locked.
func LockedUntilClaimed(spec *corev1.PodSpec) bool {
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if e.Name == sandboxd.RequireClaimEnv && e.Value == "true" {
				return true
			}
		}
	}
	return false
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
