package sandboxwarmpool

import (
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
