package e2b

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestNotifierWakesOnlyTheClaimsWait: a wait follows its claim and the Sandbox bound to it, and
// nothing else of the namespace.
func TestNotifierWakesOnlyTheClaimsWait(t *testing.T) {
	n := newNotifier()
	claim := &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "abc", UID: "uid-abc"}}
	changed, stop := n.follow(claim)

	member := func(name, claimUID string) *agentsv1beta1.Sandbox {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, Labels: map[string]string{}}}
		if claimUID != "" {
			sb.Labels[agentsv1beta1.ClaimUIDLabel] = claimUID
		}
		return sb
	}
	for _, other := range []any{
		&extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "other", UID: "uid-other"}},
		&extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "abc", UID: "uid-x"}},
		member("pool-unclaimed", ""),
		member("pool-taken", "uid-other"),
		&extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "base"}},
	} {
		n.wake(other)
		if woken(changed) {
			t.Errorf("the wait on claim team/abc was woken by %T %+v", other, other)
		}
	}
	for _, mine := range []any{
		claim,
		member("pool-adopted", "uid-abc"),
		toolscache.DeletedFinalStateUnknown{Key: "team/abc", Obj: claim},
	} {
		n.wake(mine)
		n.wake(mine) // a second change while one is pending does not block
		if !woken(changed) {
			t.Errorf("the wait on claim team/abc was not woken by %T", mine)
		}
	}
	stop()
	if len(n.waiters) != 0 {
		t.Errorf("%d keys left after the wait stopped", len(n.waiters))
	}
}
