package blueprint

import (
	"encoding/json"
	"fmt"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/naming"
)

// Hash is NameHash of the JSON encoding of a template's blueprint, the value of
// SandboxTemplateHashLabel. Any change of the blueprint (pod template, volume claim templates,
// service) changes it, so staleness needs no hand-kept list of fields.
func Hash(bp agentsv1beta1.SandboxBlueprint) string {
	return naming.NameHash(mustJSON(bp))
}

// PodTemplateHash is NameHash of the JSON encoding of a pod template, the value of the
// deprecated SandboxPodTemplateHashLabel.
func PodTemplateHash(pt agentsv1beta1.PodTemplate) string {
	return naming.NameHash(mustJSON(pt))
}

// TemplateRefHash is the value of SandboxTemplateRefHashLabel for a template name.
func TemplateRefHash(templateName string) string { return naming.NameHash(templateName) }

// PoolHash is the value of WarmPoolSandboxLabel for a pool name.
func PoolHash(poolName string) string { return naming.NameHash(poolName) }

// PoolSelector is the label selector of a pool's members, the pool's status.selector.
func PoolSelector(poolName string) string {
	return agentsv1beta1.WarmPoolSandboxLabel + "=" + PoolHash(poolName)
}

// Stale reports whether a pool member was made from something other than the template's current
// blueprint: another template, or an older version of this one whose pod spec, volume claim
// templates or service differ. Pod-template metadata alone never makes a member stale; it reaches
// Pods in place. The member's label is the fast path; otherwise the two blueprints are hashed
// without their metadata, so no list of compared fields needs keeping.
func Stale(tpl *extensionsv1beta1.SandboxTemplate, sb *agentsv1beta1.Sandbox) bool {
	if sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] != TemplateRefHash(tpl.Name) {
		return true
	}
	if sb.Labels[agentsv1beta1.SandboxTemplateHashLabel] == Hash(tpl.Spec.SandboxBlueprint) {
		return false
	}
	want := tpl.Spec.SandboxBlueprint.DeepCopy()
	ApplySecureDefaults(&tpl.Spec, &want.PodTemplate.Spec)
	withSandboxdPorts(tpl, &want.PodTemplate.Spec)
	if RunsSandboxd(tpl) {
		LockUntilClaimed(&want.PodTemplate.Spec)
	}
	// A member that waits small is resized to the template's resources when claimed, whatever
	// they are by then: its resources never make it stale.
	if have, w := sb.Spec.PodTemplate.Spec.Containers, want.PodTemplate.Spec.Containers; sb.Annotations[agentsv1beta1.InPlaceResizeAnnotation] == "true" && len(have) > 0 && len(w) > 0 {
		w[0].Resources = *have[0].Resources.DeepCopy()
	}
	return specHash(*want) != specHash(sb.Spec.SandboxBlueprint)
}

// specHash hashes a blueprint without its pod-template metadata.
func specHash(bp agentsv1beta1.SandboxBlueprint) string {
	bp.PodTemplate.ObjectMeta = agentsv1beta1.PodMetadata{}
	return naming.NameHash(mustJSON(bp))
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// The API types always encode; a failure here is a programming error.
		panic(fmt.Sprintf("encoding %T: %v", v, err))
	}
	return string(b)
}
