package sandboxclaim

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// TestResizeGiveUpCountsFromTheSandboxReport: a claim gives its warm Sandbox up ResizeGiveUpAfter
// after the Sandbox controller first reports on the resize, however long that report took. A
// claim that counted from its adoption gave up on a Sandbox whose controller was slow to send the
// resize (CI, stop 36: the warm Pod was never resized and the claim went cold). The wait never
// reaches the API here: a pass that gave up would delete the Sandbox through the nil client.
func TestResizeGiveUpCountsFromTheSandboxReport(t *testing.T) {
	const giveUp = 30 * time.Second
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	r := &Reconciler{opts: Options{Clock: clock, ResizeGiveUpAfter: giveUp}}
	claim := &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "claim-uid", Generation: 1}}
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns", Generation: 2,
		Labels:      map[string]string{agentsv1beta1.LaunchTypeLabel: agentsv1beta1.LaunchTypeWarm},
		Annotations: map[string]string{agentsv1beta1.InPlaceResizeAnnotation: "true"}}}
	// The member's report from before its adoption (generation 1) says nothing of this resize.
	sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.SandboxConditionResized, Status: metav1.ConditionTrue,
		ObservedGeneration: 1, Reason: agentsv1beta1.SandboxReasonResized}}

	wait := func(wantReason string, wantGiveUpIn time.Duration) {
		t.Helper()
		got, err := r.awaitResize(context.Background(), claim, sb, nil)
		var re *resizeError
		if !errors.As(err, &re) {
			t.Fatalf("awaitResize = %v, want the claim waiting", err)
		}
		if got != sb || re.reason != wantReason || re.giveUpIn != wantGiveUpIn {
			t.Fatalf("awaitResize waits with reason %q, gives up in %s; want %q, %s", re.reason, re.giveUpIn, wantReason, wantGiveUpIn)
		}
	}
	wait(agentsv1beta1.SandboxReasonResizeInProgress, giveUp)
	clock.Step(3 * giveUp) // the Sandbox controller is slow to send the resize
	wait(agentsv1beta1.SandboxReasonResizeInProgress, giveUp)

	sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.SandboxConditionResized, Status: metav1.ConditionFalse,
		ObservedGeneration: 2, Reason: agentsv1beta1.SandboxReasonResizeDeferred, Message: "the kubelet cannot fit the resize on its node yet"}}
	wait(agentsv1beta1.SandboxReasonResizeDeferred, giveUp)
	clock.Step(giveUp - time.Second)
	wait(agentsv1beta1.SandboxReasonResizeDeferred, time.Second)
	if mem := r.memory.of(claim.UID); mem.resizeFellBack != nil {
		t.Fatalf("the claim fell back before its give-up: %v", mem.resizeFellBack)
	}
}
