// Package podmeta computes the labels and annotations the Sandbox controller owns on a Pod: the
// user's pod-template metadata (minus reserved keys), the tracking label, the extension labels
// copied from the Sandbox, and the claim identity. It is pure: no client, no context, no logging.
package podmeta

import (
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/naming"
)

// Kinds of the extensions API group that may control a Sandbox.
const (
	claimKind    = "SandboxClaim"
	warmPoolKind = "SandboxWarmPool"
)

const (
	createdByUnknown = "unknown"
	propagatedKeySep = ","
)

// createdByValues are the values of CreatedByLabel kept as they are on the Pod; anything else is
// reported as "unknown" so the label's cardinality stays bounded.
var createdByValues = map[string]bool{"go-client": true, "python-client": true, "controller": true}

// Source is what the Pod's metadata is computed from.
type Source struct {
	// SandboxName is hashed into the tracking label.
	SandboxName string
	// SandboxLabels are the Sandbox object's own labels (extension labels and created-by).
	SandboxLabels map[string]string
	// Controller is the Sandbox's controller owner reference, or nil.
	Controller *metav1.OwnerReference
	// TemplateLabels and TemplateAnnotations are spec.podTemplate.metadata.
	TemplateLabels      map[string]string
	TemplateAnnotations map[string]string
}

// IsReservedLabel reports whether a label key belongs to the controllers and must never be
// copied from a user's pod template.
func IsReservedLabel(key string) bool {
	return strings.HasPrefix(key, agentsv1beta1.ReservedKeyPrefix) ||
		strings.HasPrefix(key, agentsv1beta1.ReservedExtensionsKeyPrefix)
}

// IsReservedAnnotation is IsReservedLabel for annotations, which also reserve the trace context.
func IsReservedAnnotation(key string) bool {
	return IsReservedLabel(key) || key == agentsv1beta1.TraceContextAnnotation
}

// NormalizeCreatedBy maps a created-by label value onto its bounded set of Pod values.
func NormalizeCreatedBy(v string) string {
	if createdByValues[v] {
		return v
	}
	return createdByUnknown
}

// Apply returns the labels and annotations a Pod should carry, starting from its current ones
// (nil for a Pod about to be created). Keys the controller does not manage are kept untouched.
// The inputs are not modified.
func Apply(src Source, labels, annotations map[string]string) (map[string]string, map[string]string) {
	labels, annotations = maps.Clone(labels), maps.Clone(annotations)
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}

	userLabels := propagate(labels, src.TemplateLabels, annotations[agentsv1beta1.PropagatedLabelsAnnotation],
		IsReservedLabel, agentsv1beta1.SandboxNameHashLabel)
	userAnnotations := propagate(annotations, src.TemplateAnnotations, annotations[agentsv1beta1.PropagatedAnnotationsAnnotation],
		IsReservedAnnotation, agentsv1beta1.PropagatedLabelsAnnotation, agentsv1beta1.PropagatedAnnotationsAnnotation)
	setOrDelete(annotations, agentsv1beta1.PropagatedLabelsAnnotation, strings.Join(userLabels, propagatedKeySep))
	setOrDelete(annotations, agentsv1beta1.PropagatedAnnotationsAnnotation, strings.Join(userAnnotations, propagatedKeySep))

	labels[agentsv1beta1.SandboxNameHashLabel] = naming.NameHash(src.SandboxName)
	applyExtensionLabels(src, labels)
	applyClaimIdentity(src.Controller, labels, annotations)
	createdBy, ok := src.SandboxLabels[agentsv1beta1.CreatedByLabel]
	if ok {
		createdBy = NormalizeCreatedBy(createdBy)
	}
	setOrDelete(labels, agentsv1beta1.CreatedByLabel, createdBy)
	policed := ""
	if _, ok := src.TemplateAnnotations[egress.PolicyAnnotation]; ok {
		policed = "true"
	}
	setOrDelete(labels, egress.PolicedLabel, policed)

	if len(annotations) == 0 {
		annotations = nil
	}
	return labels, annotations
}

// propagate copies the non-reserved template entries into current, removes entries that an
// earlier pass propagated (listed in previous) but the template no longer has, and scrubs reserved
// keys from that list except the ones in keep: older controllers could have propagated them. It
// returns the sorted keys it propagated.
func propagate(current, template map[string]string, previous string, reserved func(string) bool, keep ...string) []string {
	for _, key := range splitKeys(previous) {
		_, inTemplate := template[key]
		switch {
		case reserved(key) && !slices.Contains(keep, key):
			delete(current, key)
		case !reserved(key) && !inTemplate:
			delete(current, key)
		}
	}
	var keys []string
	for key, value := range template {
		if reserved(key) {
			continue
		}
		current[key] = value
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// applyExtensionLabels copies the pool and template labels from the Sandbox only while an
// extensions controller owns it: a claimed Sandbox leaves its pool, but stays selected by its
// template's NetworkPolicy.
func applyExtensionLabels(src Source, labels map[string]string) {
	kind := extensionsControllerKind(src.Controller)
	copyIf := func(key string, allowed bool) {
		value, ok := src.SandboxLabels[key]
		if !allowed || !ok {
			delete(labels, key)
			return
		}
		labels[key] = value
	}
	copyIf(agentsv1beta1.WarmPoolSandboxLabel, kind == warmPoolKind)
	copyIf(agentsv1beta1.SandboxTemplateRefHashLabel, kind == warmPoolKind || kind == claimKind)
}

// applyClaimIdentity labels the Pod with the UID and name of the claim that controls its Sandbox,
// so consumers can find the Pod of a claim; unlike upstream, which filters these keys out.
func applyClaimIdentity(ref *metav1.OwnerReference, labels, annotations map[string]string) {
	if extensionsControllerKind(ref) != claimKind {
		delete(labels, agentsv1beta1.ClaimUIDLabel)
		delete(annotations, agentsv1beta1.ClaimNameAnnotation)
		return
	}
	labels[agentsv1beta1.ClaimUIDLabel] = string(ref.UID)
	annotations[agentsv1beta1.ClaimNameAnnotation] = ref.Name
}

// ClaimControlled reports whether ref, a Sandbox's controller reference, is a SandboxClaim.
func ClaimControlled(ref *metav1.OwnerReference) bool {
	return extensionsControllerKind(ref) == claimKind
}

// extensionsControllerKind returns the kind of ref when it belongs to the extensions API group
// (any version), and "" otherwise.
func extensionsControllerKind(ref *metav1.OwnerReference) string {
	if ref == nil {
		return ""
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != extensionsv1beta1.GroupVersion.Group {
		return ""
	}
	return ref.Kind
}

func splitKeys(list string) []string {
	if list == "" {
		return nil
	}
	return strings.Split(list, propagatedKeySep)
}

func setOrDelete(m map[string]string, key, value string) {
	if value == "" {
		delete(m, key)
		return
	}
	m[key] = value
}
