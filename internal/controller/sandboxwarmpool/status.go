package sandboxwarmpool

import (
	"k8s.io/apimachinery/pkg/api/equality"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/warmpool"
)

// setStatus writes the observed counts into the pool's status.
func setStatus(pool *extensionsv1beta1.SandboxWarmPool, plan warmpool.Plan) {
	pool.Status.Replicas = plan.Replicas
	pool.Status.ReadyReplicas = plan.ReadyReplicas
	pool.Status.Selector = blueprint.PoolSelector(pool.Name)
	pool.Status.ObservedGeneration = pool.Generation
}

func poolStatus(p *extensionsv1beta1.SandboxWarmPool) any { return p.Status }

// countsOnly reports whether before and after differ, and only in the replica counts.
func countsOnly(before, after extensionsv1beta1.SandboxWarmPoolStatus) bool {
	if equality.Semantic.DeepEqual(before, after) {
		return false
	}
	before.Replicas, before.ReadyReplicas = after.Replicas, after.ReadyReplicas
	return equality.Semantic.DeepEqual(before, after)
}
