package sdk

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestAttachWakesAnIdleSandbox: a claim whose sandbox the idle controller suspended (wake
// allowed) is woken by Attach, which `paddock exec` uses, instead of answering ErrSuspended.
func TestAttachWakesAnIdleSandbox(t *testing.T) {
	ns := env.Namespace(t)
	env.PlayKubelet(t, ns)
	warmPool(t, ns, 1)
	ctx := framework.Context(t, framework.DefaultTimeout)
	first, err := newClient(t).Claim(ctx, sdk.ClaimOptions{WarmPool: "pool", Namespace: ns, Name: "napper"})
	if err != nil {
		t.Fatal(err)
	}
	sb := &agentsv1beta1.Sandbox{}
	sb.Namespace, sb.Name = ns, first.SandboxName()
	// What the idle controller writes when it suspends.
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"operatingMode":%q}}`,
		agentsv1beta1.SuspendReasonAnnotation, agentsv1beta1.SuspendReasonIdle, agentsv1beta1.SandboxOperatingModeSuspended)
	if err := env.Client.Patch(ctx, sb, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
	woken, err := newClient(t).Attach(ctx, ns, "napper")
	if err != nil {
		t.Fatalf("Attach to a claim suspended for being idle = %v, want it woken", err)
	}
	if diff := cmp.Diff([]string{framework.PodIP}, woken.PodIPs()); diff != "" {
		t.Errorf("PodIPs after the wake (-want +got):\n%s", diff)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil || sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeRunning {
		t.Errorf("after Attach: operatingMode %q, %v; want Running", sb.Spec.OperatingMode, err)
	}
}
