package blueprint

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/podresize"
)

// CreatedByController is the created-by value of Sandboxes a controller made on its own.
const CreatedByController = "controller"

// ControllerRef is a controller owner reference to an extensions object of the given kind.
func ControllerRef(kind string, obj metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         extensionsv1beta1.GroupVersion.String(),
		Kind:               kind,
		Name:               obj.GetName(),
		UID:                obj.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// PoolOptions tune the members a pool makes.
type PoolOptions struct {
	// SafeToEvict stamps the autoscaler's safe-to-evict annotation on members' pod templates
	// (unless the template sets it), so idle warm members never keep a node alive.
	SafeToEvict bool
	// Idle sizes the first container of members to wait small (pool annotations
	// paddock.dev/idle-cpu and idle-memory); the claim that adopts a member resizes it in place.
	Idle podresize.Sizes
}

// PoolMember is a new warm-pool Sandbox: the template's blueprint with secure defaults, named
// after the pool with a generated suffix, labelled with the hashes that make it a member and
// tell whether it is stale.
func PoolMember(pool *extensionsv1beta1.SandboxWarmPool, tpl *extensionsv1beta1.SandboxTemplate, opts PoolOptions) *agentsv1beta1.Sandbox {
	bp := tpl.Spec.SandboxBlueprint.DeepCopy()
	ids := map[string]string{
		agentsv1beta1.WarmPoolSandboxLabel:        PoolHash(pool.Name),
		agentsv1beta1.SandboxTemplateRefHashLabel: TemplateRefHash(tpl.Name),
		agentsv1beta1.SandboxPodTemplateHashLabel: PodTemplateHash(tpl.Spec.PodTemplate), //nolint:staticcheck // still written for wire compatibility
		agentsv1beta1.SandboxTemplateHashLabel:    Hash(tpl.Spec.SandboxBlueprint),
	}
	labels := maps.Clone(ids)
	labels[agentsv1beta1.LaunchTypeLabel] = agentsv1beta1.LaunchTypeWarm
	labels[agentsv1beta1.CreatedByLabel] = CreatedByController
	for k, v := range ids {
		bp.PodTemplate.ObjectMeta.Labels = withKey(bp.PodTemplate.ObjectMeta.Labels, k, v)
	}
	if _, set := bp.PodTemplate.ObjectMeta.Annotations[agentsv1beta1.SafeToEvictAnnotation]; opts.SafeToEvict && !set {
		bp.PodTemplate.ObjectMeta.Annotations = withKey(bp.PodTemplate.ObjectMeta.Annotations, agentsv1beta1.SafeToEvictAnnotation, "true")
	}
	ApplySecureDefaults(&tpl.Spec, &bp.PodTemplate.Spec)
	withSandboxdPorts(tpl, &bp.PodTemplate.Spec)
	if RunsSandboxd(tpl) {
		LockUntilClaimed(&bp.PodTemplate.Spec)
	}
	annotations := map[string]string{agentsv1beta1.SandboxTemplateRefAnnotation: tpl.Name}
	if v := suspendMode(nil, tpl); v != "" {
		annotations[snapshotsv1alpha1.SuspendAnnotation] = v
	}
	if containers := bp.PodTemplate.Spec.Containers; !opts.Idle.IsZero() && len(containers) > 0 {
		podresize.Apply(&containers[0].Resources, opts.Idle, true)
		annotations[agentsv1beta1.InPlaceResizeAnnotation] = "true"
	}
	return &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    pool.Name + "-",
			Namespace:       pool.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{ControllerRef("SandboxWarmPool", pool)},
		},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: *bp},
	}
}

// ClaimResources returns the resources the first container of tpl gets for claim: the
// template's, with the CPU and memory the claim asks for (paddock.dev/cpu, paddock.dev/memory)
// applied. ok is false when the template has no container. The claim's values must have been
// checked against its pool's bounds (podresize.Check).
func ClaimResources(claim *extensionsv1beta1.SandboxClaim, tpl *extensionsv1beta1.SandboxTemplate) (_ corev1.ResourceRequirements, ok bool, _ error) {
	containers := tpl.Spec.PodTemplate.Spec.Containers
	if len(containers) == 0 {
		return corev1.ResourceRequirements{}, false, nil
	}
	asked, err := podresize.Requested(claim.Annotations)
	if err != nil {
		return corev1.ResourceRequirements{}, false, err
	}
	res := *containers[0].Resources.DeepCopy()
	podresize.Apply(&res, asked, false)
	return res, true, nil
}

// sizeForClaim gives the first container of spec the resources of the claim (ClaimResources).
// It reports whether they changed.
func sizeForClaim(spec *corev1.PodSpec, claim *extensionsv1beta1.SandboxClaim, tpl *extensionsv1beta1.SandboxTemplate) (bool, error) {
	want, ok, err := ClaimResources(claim, tpl)
	containers := spec.Containers
	if err != nil || !ok || len(containers) == 0 || podresize.Equal(containers[0].Resources, want) {
		return false, err
	}
	containers[0].Resources = want
	return true, nil
}

// NameMember gives a pool member built by PoolMember its final name, prefix plus suffix, in
// place of its generateName, and records that its Pod will carry that name: a member named by
// the controller rather than the API server spares the Sandbox controller a metadata patch.
func NameMember(sb *agentsv1beta1.Sandbox, prefix, suffix string) {
	sb.GenerateName = ""
	sb.Name = prefix + suffix
	sb.Annotations = withKey(sb.Annotations, agentsv1beta1.PodNameAnnotation, sb.Name)
}

// ColdSandbox is the Sandbox a claim gets when no warm member serves it: named after the claim,
// made from the template with the claim's env and volume claim templates injected under the
// template's policies, and controlled by the claim.
func ColdSandbox(claim *extensionsv1beta1.SandboxClaim, tpl *extensionsv1beta1.SandboxTemplate) (*agentsv1beta1.Sandbox, error) {
	bp := tpl.Spec.SandboxBlueprint.DeepCopy()
	md, err := ClaimPodMetadata(claim, tpl)
	if err != nil {
		return nil, err
	}
	bp.PodTemplate.ObjectMeta = md
	if bp.VolumeClaimTemplates, err = MergeVolumeClaimTemplates(bp.VolumeClaimTemplates, claim.Spec.VolumeClaimTemplates, tpl.Spec.VolumeClaimTemplatesPolicy); err != nil {
		return nil, err
	}
	if err := InjectEnv(&bp.PodTemplate.Spec, claim.Spec.Env, tpl.Spec.EnvVarsInjectionPolicy); err != nil {
		return nil, err
	}
	ApplySecureDefaults(&tpl.Spec, &bp.PodTemplate.Spec)
	withSandboxdPorts(tpl, &bp.PodTemplate.Spec)
	if _, err := sizeForClaim(&bp.PodTemplate.Spec, claim, tpl); err != nil {
		return nil, err
	}
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Name:      claim.Name,
			Namespace: claim.Namespace,
			Labels: map[string]string{
				agentsv1beta1.ClaimUIDLabel:               string(claim.UID),
				agentsv1beta1.LaunchTypeLabel:             agentsv1beta1.LaunchTypeCold,
				agentsv1beta1.SandboxTemplateRefHashLabel: TemplateRefHash(tpl.Name),
			},
			// The Pod will carry the Sandbox's name; saying so at create time spares the
			// Sandbox controller a metadata patch.
			Annotations: map[string]string{
				agentsv1beta1.SandboxTemplateRefAnnotation: tpl.Name,
				agentsv1beta1.PodNameAnnotation:            claim.Name,
			},
			OwnerReferences: []metav1.OwnerReference{ControllerRef("SandboxClaim", claim)},
		},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: *bp},
	}
	if v := claim.Labels[agentsv1beta1.CreatedByLabel]; v != "" {
		sb.Labels[agentsv1beta1.CreatedByLabel] = v
	}
	if v := claim.Annotations[agentsv1beta1.TraceContextAnnotation]; v != "" {
		sb.Annotations[agentsv1beta1.TraceContextAnnotation] = v
	}
	if v := suspendMode(claim, tpl); v != "" {
		sb.Annotations[snapshotsv1alpha1.SuspendAnnotation] = v
	}
	return sb, nil
}

// suspendMode is the snapshots.paddock.dev/suspend value a Sandbox made from tpl for claim
// (nil: a pool member) carries: the claim's, else the template's; "" when neither sets one.
func suspendMode(claim *extensionsv1beta1.SandboxClaim, tpl *extensionsv1beta1.SandboxTemplate) string {
	if claim != nil {
		if v, ok := claim.Annotations[snapshotsv1alpha1.SuspendAnnotation]; ok {
			return v
		}
	}
	return tpl.Annotations[snapshotsv1alpha1.SuspendAnnotation]
}

// Adopt rewrites a warm member, in place, into a Sandbox bound to claim: the claim becomes its
// only controller, pool labels give way to the claim's identity, and the pod-template metadata
// becomes the claim's. The pod spec is untouched, so the running Pod is not restarted, except for
// the first container's CPU and memory when they differ from what the claim gets
// (ClaimResources): those the Sandbox controller resizes in place (InPlaceResizeAnnotation).
func Adopt(sb *agentsv1beta1.Sandbox, claim *extensionsv1beta1.SandboxClaim, tpl *extensionsv1beta1.SandboxTemplate) error {
	md, err := ClaimPodMetadata(claim, tpl)
	if err != nil {
		return err
	}
	resized, err := sizeForClaim(&sb.Spec.PodTemplate.Spec, claim, tpl)
	if err != nil {
		return err
	}
	if resized {
		sb.Annotations = withKey(sb.Annotations, agentsv1beta1.InPlaceResizeAnnotation, "true")
	}
	sb.Spec.PodTemplate.ObjectMeta = md
	sb.OwnerReferences = []metav1.OwnerReference{ControllerRef("SandboxClaim", claim)}
	poolOnly := []string{agentsv1beta1.WarmPoolSandboxLabel, agentsv1beta1.SandboxPodTemplateHashLabel, agentsv1beta1.SandboxTemplateHashLabel, agentsv1beta1.CreatedByLabel} //nolint:staticcheck // removed for wire compatibility
	for _, k := range poolOnly {
		delete(sb.Labels, k)
	}
	sb.Labels = withKey(sb.Labels, agentsv1beta1.LaunchTypeLabel, agentsv1beta1.LaunchTypeWarm)
	sb.Labels[agentsv1beta1.ClaimUIDLabel] = string(claim.UID)
	sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] = TemplateRefHash(tpl.Name)
	if v := claim.Labels[agentsv1beta1.CreatedByLabel]; v != "" {
		sb.Labels[agentsv1beta1.CreatedByLabel] = v
	}
	sb.Annotations = withKey(sb.Annotations, agentsv1beta1.PodNameAnnotation, sb.Name)
	if v := claim.Annotations[agentsv1beta1.TraceContextAnnotation]; v != "" {
		sb.Annotations[agentsv1beta1.TraceContextAnnotation] = v
	}
	// The member carries the template's choice; the claim's overrides it.
	if v, ok := claim.Annotations[snapshotsv1alpha1.SuspendAnnotation]; ok {
		sb.Annotations[snapshotsv1alpha1.SuspendAnnotation] = v
	}
	return nil
}

// RefreshClaimMetadata brings a bound Sandbox's pod-template metadata and identity labels in line
// with the template and claim, so metadata edits reach bound Sandboxes. It reports whether
// anything changed.
func RefreshClaimMetadata(sb *agentsv1beta1.Sandbox, claim *extensionsv1beta1.SandboxClaim, tpl *extensionsv1beta1.SandboxTemplate) (bool, error) {
	md, err := ClaimPodMetadata(claim, tpl)
	if err != nil {
		return false, err
	}
	changed := !maps.Equal(md.Labels, sb.Spec.PodTemplate.ObjectMeta.Labels) || !maps.Equal(md.Annotations, sb.Spec.PodTemplate.ObjectMeta.Annotations)
	sb.Spec.PodTemplate.ObjectMeta = md
	want := map[string]string{
		agentsv1beta1.ClaimUIDLabel:               string(claim.UID),
		agentsv1beta1.SandboxTemplateRefHashLabel: TemplateRefHash(tpl.Name),
		agentsv1beta1.CreatedByLabel:              claim.Labels[agentsv1beta1.CreatedByLabel],
	}
	for k, v := range want {
		if sb.Labels[k] == v {
			continue
		}
		changed = true
		if v == "" {
			delete(sb.Labels, k)
		} else {
			sb.Labels = withKey(sb.Labels, k, v)
		}
	}
	return changed, nil
}

// PoolOf returns the name of the SandboxWarmPool controlling obj, matching group and kind in any
// version, so owner references written by older API versions still count.
func PoolOf(obj metav1.Object) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != "SandboxWarmPool" {
		return "", false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != extensionsv1beta1.GroupVersion.Group {
		return "", false
	}
	return ref.Name, true
}

// ControlledBy reports whether obj's controller is the given object (by UID).
func ControlledBy(obj, owner metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == owner.GetUID()
}
