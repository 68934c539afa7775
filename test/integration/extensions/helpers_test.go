package extensions

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func get[T client.Object](ctx context.Context, ns, name string, obj T) (T, error) {
	err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	return obj, err
}

// members lists the Sandboxes carrying a pool's label, straight from the API server.
func members(ctx context.Context, ns, pool string) ([]agentsv1beta1.Sandbox, error) {
	var list agentsv1beta1.SandboxList
	err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.WarmPoolSandboxLabel: blueprint.PoolHash(pool)})
	return list.Items, err
}

// waitPoolReady waits until the pool reports n ready members and holds exactly n.
func waitPoolReady(t *testing.T, ns, pool string, n int32) {
	t.Helper()
	framework.EventuallyWithin(t, 3*framework.DefaultTimeout, func(ctx context.Context) error {
		p, err := get(ctx, ns, pool, &extensionsv1beta1.SandboxWarmPool{})
		if err != nil {
			return err
		}
		ms, err := members(ctx, ns, pool)
		if err != nil {
			return err
		}
		if p.Status.ReadyReplicas != n || p.Status.Replicas != n || len(ms) != int(n) {
			return fmt.Errorf("pool %s: status %d/%d ready, %d members; want %d", pool, p.Status.ReadyReplicas, p.Status.Replicas, len(ms), n)
		}
		return nil
	})
}

// readyPool creates a template and a pool of n members and waits until all are ready.
func readyPool(t *testing.T, ns, name string, n int32, tpl *builder.TemplateWrapper, pool *builder.WarmPoolWrapper) {
	t.Helper()
	create(t, tpl.Obj())
	create(t, pool.Replicas(n).Obj())
	waitPoolReady(t, ns, name, n)
}

// waitClaimReady waits until the claim is Ready and bound, and returns it with its Sandbox.
func waitClaimReady(t *testing.T, ns, name string) (*extensionsv1beta1.SandboxClaim, *agentsv1beta1.Sandbox) {
	t.Helper()
	var claim *extensionsv1beta1.SandboxClaim
	var sb *agentsv1beta1.Sandbox
	framework.Eventually(t, func(ctx context.Context) error {
		var err error
		if claim, err = get(ctx, ns, name, &extensionsv1beta1.SandboxClaim{}); err != nil {
			return err
		}
		if err := builder.HasCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady, "True", ""); err != nil {
			return err
		}
		if claim.Status.Sandbox.Name == "" {
			return fmt.Errorf("claim %s is Ready without a sandbox name", name)
		}
		sb, err = get(ctx, ns, claim.Status.Sandbox.Name, &agentsv1beta1.Sandbox{})
		return err
	})
	return claim, sb
}

// waitClaimReason waits until the claim's Ready condition has the given status and reason.
func waitClaimReason(t *testing.T, ns, name, status, reason string) *extensionsv1beta1.SandboxClaim {
	t.Helper()
	var claim *extensionsv1beta1.SandboxClaim
	framework.Eventually(t, func(ctx context.Context) error {
		var err error
		if claim, err = get(ctx, ns, name, &extensionsv1beta1.SandboxClaim{}); err != nil {
			return err
		}
		return builder.HasCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady, metav1Status(status), reason)
	})
	return claim
}

func metav1Status(s string) metav1.ConditionStatus { return metav1.ConditionStatus(s) }

func objectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}

func metav1ControllerUID(obj metav1.Object) types.UID {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return ref.UID
	}
	return ""
}
