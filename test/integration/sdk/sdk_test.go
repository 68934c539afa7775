// Package sdk tests the public Go SDK against a real API server with every controller running as
// main wires them (--extensions); the test plays the kubelet.
package sdk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) { framework.RunMain(m, &env, framework.StartControllers) }

func newClient(t testing.TB) *sdk.Client {
	c, err := sdk.New(env.Config, sdk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// warmPool creates a template and a pool of n and, when n > 0, waits until a member is Ready.
func warmPool(t testing.TB, ns string, n int32) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(n).Obj())
	if n == 0 {
		return
	}
	framework.Eventually(t, func(ctx context.Context) error {
		pool := &extensionsv1beta1.SandboxWarmPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pool"}, pool); err != nil {
			return err
		}
		if pool.Status.ReadyReplicas != n {
			return fmt.Errorf("pool readyReplicas = %d, want %d", pool.Status.ReadyReplicas, n)
		}
		return nil
	})
}

func claimGone(t testing.TB, ns, name string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &extensionsv1beta1.SandboxClaim{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("claim %s/%s still exists (err %v)", ns, name, err)
	})
}

func TestClaimFromWarmPoolThenRelease(t *testing.T) {
	ns := env.Namespace(t)
	env.PlayKubelet(t, ns)
	warmPool(t, ns, 1)
	members := &agentsv1beta1.SandboxList{}
	if err := env.Client.List(framework.Context(t, framework.DefaultTimeout), members, client.InNamespace(ns)); err != nil || len(members.Items) != 1 {
		t.Fatalf("pool members: %d, %v; want 1", len(members.Items), err)
	}

	ctx := framework.Context(t, framework.DefaultTimeout)
	sb, err := newClient(t).Claim(ctx, sdk.ClaimOptions{WarmPool: "pool", Namespace: ns,
		Labels: map[string]string{"team": "a"}, PodLabels: map[string]string{"sandbox.users.io/from": "sdk"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.SandboxName() != members.Items[0].Name {
		t.Errorf("SandboxName = %q, want the warm member %q", sb.SandboxName(), members.Items[0].Name)
	}
	if diff := cmp.Diff([]string{framework.PodIP}, sb.PodIPs()); diff != "" {
		t.Errorf("PodIPs (-want +got):\n%s", diff)
	}
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sb.ClaimName()}, claim); err != nil {
		t.Fatal(err)
	}
	if got := claim.Labels[agentsv1beta1.CreatedByLabel]; got != sdk.CreatedBy {
		t.Errorf("created-by label = %q, want %q", got, sdk.CreatedBy)
	}
	if _, err := time.Parse(time.RFC3339Nano, claim.Annotations[extensionsv1beta1.ClientFirstRequestedAtAnnotation]); err != nil {
		t.Errorf("client-first-requested-at annotation: %v", err)
	}
	if !strings.HasPrefix(claim.Name, "sandbox-claim-") || claim.Labels["team"] != "a" {
		t.Errorf("claim %s labels %v: want a generated sandbox-claim- name and label team=a", claim.Name, claim.Labels)
	}

	attached, err := newClient(t).Attach(ctx, ns, sb.ClaimName())
	if err != nil || attached.SandboxName() != sb.SandboxName() {
		t.Fatalf("Attach = %v, %v; want the same sandbox %q", attached, err, sb.SandboxName())
	}

	if err := sb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	claimGone(t, ns, sb.ClaimName())
	if _, err := newClient(t).Attach(ctx, ns, sb.ClaimName()); !errors.Is(err, sdk.ErrSandboxGone) {
		t.Errorf("Attach after Release = %v, want ErrSandboxGone", err)
	}
	if err := sb.Release(ctx); err != nil {
		t.Errorf("second Release = %v, want nil (already gone)", err)
	}
}

func TestClaimPoolNotFoundLeavesNothing(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	_, err := newClient(t).Claim(ctx, sdk.ClaimOptions{WarmPool: "missing", Namespace: ns})
	if !errors.Is(err, sdk.ErrPoolNotFound) {
		t.Fatalf("err = %v, want ErrPoolNotFound", err)
	}
	if want := fmt.Sprintf("warm pool %q not found in namespace %q", "missing", ns); !strings.Contains(err.Error(), want) {
		t.Errorf("err = %q, want it to say %q", err, want)
	}
	claims := &extensionsv1beta1.SandboxClaimList{}
	if err := env.Client.List(ctx, claims, client.InNamespace(ns)); err != nil || len(claims.Items) != 0 {
		t.Errorf("claims left behind: %d (%v), want 0", len(claims.Items), err)
	}
}

// TestClaimNeverReadyCleansUp: no kubelet runs, so the Pod never becomes Ready; the deadline
// ends the wait with the controller's last reason and the claim is deleted.
func TestClaimNeverReadyCleansUp(t *testing.T) {
	ns := env.Namespace(t)
	warmPool(t, ns, 0)
	// The deadline bounds the wait; it is long enough for the controller's first status write.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err := newClient(t).Claim(ctx, sdk.ClaimOptions{WarmPool: "pool", Namespace: ns, Name: "stuck"})
	var ce *sdk.ClaimError
	if !errors.As(err, &ce) || !errors.Is(err, sdk.ErrNotReady) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a *ClaimError wrapping ErrNotReady and the deadline", err)
	}
	if ce.Name != "stuck" || ce.Reason == "" {
		t.Errorf("ClaimError name %q reason %q, want claim stuck and the last Ready reason (err: %v)", ce.Name, ce.Reason, err)
	}
	claimGone(t, ns, "stuck")
}

// TestClaimRejectedFailsFast: a reason waiting will not fix ends the wait at once, well before
// the deadline, and the claim is deleted.
func TestClaimRejectedFailsFast(t *testing.T) {
	ns := env.Namespace(t)
	warmPool(t, ns, 0)
	ctx := framework.Context(t, framework.DefaultTimeout)
	_, err := newClient(t).Claim(ctx, sdk.ClaimOptions{WarmPool: "pool", Namespace: ns, Name: "bad-label",
		PodLabels: map[string]string{"no-domain": "x"}})
	var ce *sdk.ClaimError
	if !errors.As(err, &ce) || !errors.Is(err, sdk.ErrClaimFailed) || ctx.Err() != nil {
		t.Fatalf("err = %v, want a *ClaimError wrapping ErrClaimFailed before the deadline", err)
	}
	if ce.Reason != extensionsv1beta1.ClaimReasonInvalidMetadata {
		t.Errorf("reason = %q, want %q", ce.Reason, extensionsv1beta1.ClaimReasonInvalidMetadata)
	}
	claimGone(t, ns, "bad-label")
}

// TestClaimDeletedWhileWaiting: someone else deletes the claim before it is Ready; the wait ends
// with ErrSandboxGone instead of running into the deadline.
func TestClaimDeletedWhileWaiting(t *testing.T) {
	ns := env.Namespace(t)
	warmPool(t, ns, 0)
	ctx := framework.Context(t, framework.DefaultTimeout)
	errs, c := make(chan error, 1), newClient(t)
	go func() {
		_, err := c.Claim(ctx, sdk.ClaimOptions{WarmPool: "pool", Namespace: ns, Name: "doomed"})
		errs <- err
	}()
	claim := &extensionsv1beta1.SandboxClaim{}
	framework.Eventually(t, func(ctx context.Context) error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "doomed"}, claim)
	})
	if err := env.Client.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !errors.Is(err, sdk.ErrSandboxGone) || ctx.Err() != nil {
		t.Fatalf("err = %v, want ErrSandboxGone before the deadline", err)
	}
}

func TestSuspendResume(t *testing.T) {
	ns := env.Namespace(t)
	env.PlayKubelet(t, ns)
	warmPool(t, ns, 1)
	ctx := framework.Context(t, framework.DefaultTimeout)
	sb, err := newClient(t).Claim(ctx, sdk.ClaimOptions{WarmPool: "pool", Namespace: ns, Name: "pausable"})
	if err != nil {
		t.Fatal(err)
	}
	podKey := client.ObjectKey{Namespace: ns, Name: sb.SandboxName()}

	if err := sb.Suspend(ctx); err != nil {
		t.Fatal(err)
	}
	sandbox := &agentsv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, podKey, sandbox); err != nil {
		t.Fatal(err)
	}
	if sandbox.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended {
		t.Errorf("operatingMode = %q after Suspend, want Suspended", sandbox.Spec.OperatingMode)
	}
	if err := builder.HasCondition(sandbox.Status.Conditions, agentsv1beta1.SandboxConditionSuspended, "True", ""); err != nil {
		t.Error(err)
	}
	if err := env.Client.Get(ctx, podKey, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod after Suspend: err = %v, want NotFound", err)
	}

	if err := sb.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, podKey, sandbox); err != nil {
		t.Fatal(err)
	}
	if err := builder.HasCondition(sandbox.Status.Conditions, agentsv1beta1.SandboxConditionReady, "True", ""); err != nil {
		t.Error(err)
	}
	if diff := cmp.Diff([]string{framework.PodIP}, sb.PodIPs()); diff != "" {
		t.Errorf("PodIPs after Resume (-want +got):\n%s", diff)
	}
	if err := sb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPickUpAClaimByName: a second program (a second Client) finds a claim the first one made
// and suspended, is told at once that it is suspended instead of waiting, resumes it by name and
// attaches to it; unknown and unbound claims say so.
func TestPickUpAClaimByName(t *testing.T) {
	ns := env.Namespace(t)
	env.PlayKubelet(t, ns)
	warmPool(t, ns, 1)
	ctx := framework.Context(t, framework.DefaultTimeout)
	first, err := newClient(t).Claim(ctx, sdk.ClaimOptions{WarmPool: "pool", Namespace: ns, Name: "keeper"})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Suspend(ctx); err != nil {
		t.Fatal(err)
	}

	later := newClient(t)
	if _, err := later.Attach(ctx, ns, "keeper"); !errors.Is(err, sdk.ErrSuspended) || ctx.Err() != nil {
		t.Fatalf("Attach to a suspended claim = %v, want ErrSuspended before the deadline", err)
	} else if !strings.Contains(err.Error(), "paddock resume keeper") {
		t.Errorf("ErrSuspended message %q does not say how to resume", err)
	}
	found, err := later.Lookup(ctx, ns, "keeper")
	if err != nil || found.SandboxName() != first.SandboxName() || found.ClaimName() != "keeper" {
		t.Fatalf("Lookup = %v, %v; want the handle of sandbox %s", found, err, first.SandboxName())
	}
	resumed, err := later.Resume(ctx, ns, "keeper")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{framework.PodIP}, resumed.PodIPs()); diff != "" {
		t.Errorf("PodIPs after Resume (-want +got):\n%s", diff)
	}
	sandbox := &agentsv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: first.SandboxName()}, sandbox); err != nil {
		t.Fatal(err)
	}
	if err := builder.HasCondition(sandbox.Status.Conditions, agentsv1beta1.SandboxConditionReady, "True", ""); err != nil || sandbox.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeRunning {
		t.Errorf("after Resume: operatingMode %q, %v; want Running and Ready", sandbox.Spec.OperatingMode, err)
	}
	attached, err := later.Attach(ctx, ns, "keeper")
	if err != nil || attached.SandboxName() != first.SandboxName() {
		t.Fatalf("Attach after Resume = %v, %v; want sandbox %s", attached, err, first.SandboxName())
	}
	if _, err := later.Resume(ctx, ns, "keeper"); err != nil {
		t.Errorf("Resume of a running sandbox = %v, want it to return once Ready", err)
	}

	for _, call := range []func() error{
		func() error { _, err := later.Lookup(ctx, ns, "nobody"); return err },
		func() error { _, err := later.Attach(ctx, ns, "nobody"); return err },
		func() error { _, err := later.Resume(ctx, ns, "nobody"); return err },
	} {
		if err := call(); !errors.Is(err, sdk.ErrSandboxGone) || !strings.Contains(err.Error(), "SandboxClaim "+ns+"/nobody: claim not found") {
			t.Errorf("unknown claim: err = %v, want ErrSandboxGone naming the claim", err)
		}
	}
	// A claim on a pool that does not exist is never bound: Lookup says not ready with the reason,
	// Attach fails fast on it.
	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("orphan", ns, "no-such-pool").Obj())
	framework.Eventually(t, func(ctx context.Context) error {
		_, err := later.Lookup(ctx, ns, "orphan")
		var ce *sdk.ClaimError
		if !errors.As(err, &ce) || !errors.Is(err, sdk.ErrNotReady) || ce.Reason != extensionsv1beta1.ClaimReasonWarmPoolNotFound {
			return fmt.Errorf("Lookup(orphan) = %v, want ErrNotReady with reason %s", err, extensionsv1beta1.ClaimReasonWarmPoolNotFound)
		}
		return nil
	})
	if _, err := later.Attach(ctx, ns, "orphan"); !errors.Is(err, sdk.ErrClaimFailed) || ctx.Err() != nil {
		t.Errorf("Attach(orphan) = %v, want ErrClaimFailed before the deadline", err)
	}
	if err := attached.Release(ctx); err != nil {
		t.Fatal(err)
	}
	claimGone(t, ns, "keeper")
}
