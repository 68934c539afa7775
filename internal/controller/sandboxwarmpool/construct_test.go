package sandboxwarmpool

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/warmpool"
)

// A member whose Pod the kubelet rejected at admission (Ready False/PodRejected while the Sandbox
// controller brings a new Pod) is a starting member: neither unschedulable nor incompatible. The
// pool leaves it to the Sandbox controller within the readiness grace period and replaces it as
// stuck after it, like any member that never turned Ready (docs/design/pod-rejection.md).
func TestMemberWithRejectedPod(t *testing.T) {
	created := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "pool"}}
	sb := agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "p-abcde", Namespace: "ns", UID: "m1", ResourceVersion: "7",
		CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{agentsv1beta1.LaunchTypeLabel: agentsv1beta1.LaunchTypeWarm},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(pool, extensionsv1beta1.GroupVersion.WithKind("SandboxWarmPool"))}}}
	sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionFalse,
		Reason: agentsv1beta1.SandboxReasonPodRejected, Message: `Pod "p-abcde" was rejected at admission by node "n" (OutOfmemory: ...)`}}
	members := observeMembers(pool, nil, []agentsv1beta1.Sandbox{sb}, func(string, types.UID) bool { return false })

	in := warmpool.Input{Desired: 1, MaxBatch: 10, TemplateKnown: true, ExpectationsSatisfied: true, Grace: 5 * time.Minute}
	in.Now = created.Add(time.Minute)
	within := warmpool.Make(members, in)
	in.Now = created.Add(6 * time.Minute)
	past := warmpool.Make(members, in)

	type outcome struct {
		Starting, Unschedulable, Incompatible int
		Deleted                               []warmpool.DeleteReason
	}
	summary := func(p warmpool.Plan) outcome {
		o := outcome{Starting: p.Starting, Unschedulable: p.Unschedulable, Incompatible: p.Incompatible}
		for _, d := range p.Delete {
			o.Deleted = append(o.Deleted, d.Reason)
		}
		return o
	}
	want := []outcome{{Starting: 1}, {Deleted: []warmpool.DeleteReason{warmpool.DeleteStuck}}}
	if diff := cmp.Diff(want, []outcome{summary(within), summary(past)}); diff != "" {
		t.Errorf("plans within and past the grace period (-want +got):\n%s", diff)
	}
}
