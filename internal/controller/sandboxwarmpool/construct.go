package sandboxwarmpool

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/warmpool"
)

// observeMembers summarises the Sandboxes carrying the pool's label for the plan. Sandboxes
// controlled by anything but this pool are not members.
func observeMembers(pool *extensionsv1beta1.SandboxWarmPool, tpl *extensionsv1beta1.SandboxTemplate,
	sandboxes []agentsv1beta1.Sandbox, deletePending func(pool string, uid types.UID) bool) []warmpool.Member {
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}.String()
	out := make([]warmpool.Member, 0, len(sandboxes))
	for i := range sandboxes {
		sb := &sandboxes[i]
		ownership := kube.OwnershipOf(sb, pool.UID)
		if ownership == kube.OwnedByOther {
			continue
		}
		scheduled := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionPodScheduled)
		incompatible := ""
		if c := sb.CannotHostSandboxd(); c != nil {
			incompatible = c.Message
		}
		out = append(out, warmpool.Member{
			Name:            sb.Name,
			UID:             sb.UID,
			ResourceVersion: sb.ResourceVersion,
			Owned:           ownership == kube.OwnedByUs,
			Deleting:        !sb.DeletionTimestamp.IsZero(),
			DeletePending:   deletePending(key, sb.UID),
			Ready:           meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady),
			Stale:           tpl != nil && blueprint.Stale(tpl, sb),
			Unschedulable:   scheduled != nil && scheduled.Status == metav1.ConditionFalse && scheduled.Reason == corev1.PodReasonUnschedulable,
			Incompatible:    incompatible,
			LaunchTypeWarm:  sb.Labels[agentsv1beta1.LaunchTypeLabel] == agentsv1beta1.LaunchTypeWarm,
			Created:         sb.CreationTimestamp.Time,
		})
	}
	return out
}

// desiredReplicas is spec.replicas, 1 when unset.
func desiredReplicas(pool *extensionsv1beta1.SandboxWarmPool) int {
	if pool.Spec.Replicas == nil {
		return 1
	}
	return int(*pool.Spec.Replicas)
}

// recreate reports whether the pool replaces stale members at once.
func recreate(pool *extensionsv1beta1.SandboxWarmPool) bool {
	return pool.Spec.UpdateStrategy != nil && pool.Spec.UpdateStrategy.Type == extensionsv1beta1.RecreateSandboxWarmPoolUpdateStrategyType
}
