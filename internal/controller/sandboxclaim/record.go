package sandboxclaim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// recordBinding emits the event and counts the metric of a binding made in this pass. It runs
// after the status write, so observers see the status before the event.
func (r *Reconciler) recordBinding(_ context.Context, claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, launch string) {
	if sb == nil || launch == "" {
		return
	}
	countCreation(claim, sb, launch)
	if launch == agentsv1beta1.LaunchTypeWarm {
		r.event(claim, corev1.EventTypeNormal, ReasonSandboxAdopted, "Adoption", fmt.Sprintf("Adopted warm pool Sandbox %q", sb.Name))
	} else {
		r.event(claim, corev1.EventTypeNormal, ReasonSandboxProvisioned, "Provisioning", fmt.Sprintf("Created Sandbox %q", sb.Name))
	}
}

// recordReady observes the startup latencies once, when this process's status write turned the
// claim Ready.
func (r *Reconciler) recordReady(claim, original *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) {
	if !isReady(claim) || isReady(original) {
		return
	}
	var firstSeen time.Time
	if v, ok := r.firstSeen.Load(claim.UID); ok {
		firstSeen = v.(time.Time)
	}
	observeStartup(claim, sb, firstSeen, r.opts.Clock.Now())
}

func (r *Reconciler) event(obj runtime.Object, eventType, reason, action, note string) {
	r.recorder.Eventf(obj, nil, eventType, reason, action, "%s", note)
}
