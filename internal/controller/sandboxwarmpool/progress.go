package sandboxwarmpool

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/warmpool"
)

// Event reasons and action of the pool controller.
const (
	ReasonNotProgressing = "WarmPoolNotProgressing"
	ReasonProgressing    = "WarmPoolProgressing"
	actionReconciling    = "Reconciling"
)

// reportProgress emits an event when the pool starts or stops holding unschedulable members.
// The state is in memory: after a restart the first pass reports again.
func (r *Reconciler) reportProgress(pool *extensionsv1beta1.SandboxWarmPool, plan warmpool.Plan) {
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}.String()
	stuck := plan.Unschedulable > 0
	r.mu.Lock()
	was := r.notProgressing[key]
	r.notProgressing[key] = stuck
	r.mu.Unlock()
	if was == stuck {
		return
	}
	if stuck {
		r.recorder.Eventf(pool, nil, corev1.EventTypeWarning, ReasonNotProgressing, actionReconciling, "%s",
			fmt.Sprintf("%d/%d sandboxes are unschedulable past the %s readiness grace period; holding them instead of replacing (replacements would be equally unschedulable)",
				plan.Unschedulable, desiredReplicas(pool), r.opts.ReadinessGracePeriod))
		return
	}
	r.recorder.Eventf(pool, nil, corev1.EventTypeNormal, ReasonProgressing, actionReconciling, "Warm pool is progressing again")
}
