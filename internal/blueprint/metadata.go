package blueprint

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

var (
	// ErrInvalidMetadata means a claim's additionalPodMetadata breaks a rule the schema cannot check.
	ErrInvalidMetadata = errors.New("invalid additionalPodMetadata")
	// ErrMetadataConflict means a claim asks for a key the template already sets to another value.
	ErrMetadataConflict = errors.New("metadata override conflict")
)

// DefaultAllowedLabelDomains is the label allow-list used when none is configured.
var DefaultAllowedLabelDomains = []string{"sandbox.users.io"}

// protectedAnnotationDomains may not be annotated by claims: they steer Kubernetes itself.
var protectedAnnotationDomains = []string{"kubernetes.io", "k8s.io", "agents.x-k8s.io"}

// ValidateAdditionalMetadata checks what admission cannot: label keys must sit under an allowed
// domain, and annotations must stay out of the Kubernetes domains (the autoscaler's
// safe-to-evict annotation excepted). Key syntax and reserved prefixes are checked by the CRD.
func ValidateAdditionalMetadata(extra extensionsv1beta1.AdditionalPodMetadata, allowedLabelDomains []string) error {
	md := agentsv1beta1.PodMetadata{Labels: Labels(extra.Labels), Annotations: extra.Annotations}
	if len(allowedLabelDomains) == 0 {
		allowedLabelDomains = DefaultAllowedLabelDomains
	}
	for _, k := range slices.Sorted(maps.Keys(md.Labels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("%w: label key %q: %s", ErrInvalidMetadata, k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(md.Labels[k]); len(errs) > 0 {
			return fmt.Errorf("%w: label %q value %q: %s", ErrInvalidMetadata, k, md.Labels[k], strings.Join(errs, "; "))
		}
		domain, _, ok := strings.Cut(k, "/")
		if !ok || !underAny(strings.ToLower(domain), allowedLabelDomains) {
			return fmt.Errorf("%w: label %q must carry a domain prefix from the allowed label domains %v", ErrInvalidMetadata, k, allowedLabelDomains)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(md.Annotations)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("%w: annotation key %q: %s", ErrInvalidMetadata, k, strings.Join(errs, "; "))
		}
		if k == agentsv1beta1.SafeToEvictAnnotation {
			continue
		}
		if domain, _, ok := strings.Cut(k, "/"); ok && underAny(strings.ToLower(domain), protectedAnnotationDomains) {
			return fmt.Errorf("%w: annotation %q is under a protected domain %v; use your own domain", ErrInvalidMetadata, k, protectedAnnotationDomains)
		}
	}
	return nil
}

func underAny(domain string, parents []string) bool {
	for _, p := range parents {
		p = strings.ToLower(strings.TrimSpace(p))
		if p != "" && (domain == p || strings.HasSuffix(domain, "."+p)) {
			return true
		}
	}
	return false
}

// ClaimPodMetadata is the pod-template metadata of a Sandbox bound to claim: the template's,
// the claim's identity labels, and the claim's additional metadata, which may add keys but not
// change the template's. The claim's own egress policy annotation (api/egress) replaces the
// template's whole.
func ClaimPodMetadata(claim *extensionsv1beta1.SandboxClaim, tpl *extensionsv1beta1.SandboxTemplate) (agentsv1beta1.PodMetadata, error) {
	md := agentsv1beta1.PodMetadata{
		Labels:      maps.Clone(tpl.Spec.PodTemplate.ObjectMeta.Labels),
		Annotations: maps.Clone(tpl.Spec.PodTemplate.ObjectMeta.Annotations),
	}
	md.Labels = withKey(md.Labels, agentsv1beta1.ClaimUIDLabel, string(claim.UID))
	md.Labels = withKey(md.Labels, agentsv1beta1.SandboxTemplateRefHashLabel, TemplateRefHash(tpl.Name))
	delete(md.Labels, agentsv1beta1.CreatedByLabel)
	if v := claim.Labels[agentsv1beta1.CreatedByLabel]; v != "" {
		md.Labels[agentsv1beta1.CreatedByLabel] = v
	}
	var err error
	if md.Labels, err = mergeNoOverride("label", md.Labels, Labels(claim.Spec.AdditionalPodMetadata.Labels)); err != nil {
		return md, err
	}
	if md.Annotations, err = mergeNoOverride("annotation", md.Annotations, claim.Spec.AdditionalPodMetadata.Annotations); err != nil {
		return md, err
	}
	if v, ok := claim.Annotations[egress.PolicyAnnotation]; ok {
		md.Annotations = withKey(md.Annotations, egress.PolicyAnnotation, v)
	}
	return md, nil
}

// Labels converts a claim's typed label values to a plain map.
func Labels(in map[string]extensionsv1beta1.LabelValue) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = string(v)
	}
	return out
}

func mergeNoOverride(kind string, base, extra map[string]string) (map[string]string, error) {
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if old, ok := base[k]; ok && old != extra[k] {
			return base, fmt.Errorf("%w: %s %q is defined in template with value %q, but claim requests %q",
				ErrMetadataConflict, kind, k, old, extra[k])
		}
		base = withKey(base, k, extra[k])
	}
	return base, nil
}

func withKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// ParseAllowedLabelDomains reads the allow-list file format: domains separated by commas or
// newlines, case-insensitive, blanks ignored.
func ParseAllowedLabelDomains(content string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(content, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if d := strings.ToLower(strings.TrimSpace(f)); d != "" {
			out = append(out, d)
		}
	}
	return out
}
