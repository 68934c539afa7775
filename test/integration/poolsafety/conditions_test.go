package poolsafety

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestPoolConditionTemplateNotFound: a pool whose template is missing says so, and recovers
// once the template exists.
func TestPoolConditionTemplateNotFound(t *testing.T) {
	readiness.SetDecision(nil)
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "missing").Replicas(1).Obj())
	waitPoolCondition(t, ns, "pool", extensionsv1beta1.PoolConditionTemplateReady, metav1.ConditionFalse, extensionsv1beta1.PoolReasonTemplateNotFound)
	waitPoolEvent(t, ns, "pool", extensionsv1beta1.PoolReasonTemplateNotFound)

	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("missing", ns).Obj())
	waitPoolCondition(t, ns, "pool", extensionsv1beta1.PoolConditionTemplateReady, metav1.ConditionTrue, extensionsv1beta1.PoolReasonTemplateFound)
	waitPoolCondition(t, ns, "pool", extensionsv1beta1.PoolConditionMembersCreated, metav1.ConditionTrue, extensionsv1beta1.PoolReasonMembersCreated)
}

// TestPoolConditionNameTooLong: a pool name that leaves no room for its members' names is
// reported and creates nothing.
func TestPoolConditionNameTooLong(t *testing.T) {
	readiness.SetDecision(nil)
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	name := strings.Repeat("p", 60)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool(name, ns, "tpl").Replicas(1).Obj())
	waitPoolCondition(t, ns, name, extensionsv1beta1.PoolConditionMembersCreated, metav1.ConditionFalse, extensionsv1beta1.PoolReasonNameTooLong)
	waitPoolEvent(t, ns, name, extensionsv1beta1.PoolReasonNameTooLong)
	assertNoMembers(t, ns, name)
}

// TestPoolConditionRuntimeClassNotFound: a template naming a RuntimeClass the cluster lacks
// stops the pool with a condition instead of members stuck in ContainerCreating; creating the
// RuntimeClass lets it fill.
func TestPoolConditionRuntimeClassNotFound(t *testing.T) {
	readiness.SetDecision(nil)
	ns := env.Namespace(t)
	ctx := framework.Context(t, 2*framework.DefaultTimeout)
	rc := "absent-" + ns
	tpl := builder.MakeTemplate("tpl", ns).Obj()
	tpl.Spec.PodTemplate.Spec.RuntimeClassName = ptr.To(rc)
	framework.MustCreate(t, ctx, env.Client, tpl)
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(1).Obj())
	waitPoolCondition(t, ns, "pool", extensionsv1beta1.PoolConditionMembersCreated, metav1.ConditionFalse, extensionsv1beta1.PoolReasonRuntimeClassNotFound)
	waitPoolEvent(t, ns, "pool", extensionsv1beta1.PoolReasonRuntimeClassNotFound)
	assertNoMembers(t, ns, "pool")

	runtimeClass := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: rc}, Handler: "runsc"}
	framework.MustCreate(t, ctx, env.Client, runtimeClass)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), runtimeClass) })
	waitPoolCondition(t, ns, "pool", extensionsv1beta1.PoolConditionMembersCreated, metav1.ConditionTrue, extensionsv1beta1.PoolReasonMembersCreated)
	waitPoolReady(t, ns, "pool", 1)
}

// TestPoolConditionQuotaExceeded: a ResourceQuota that refuses Sandboxes is named.
func TestPoolConditionQuotaExceeded(t *testing.T) {
	readiness.SetDecision(nil)
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	count := corev1.ResourceName("count/sandboxes." + agentsv1beta1.GroupVersion.Group)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-sandboxes", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{count: resource.MustParse("0")}}}
	framework.MustCreate(t, ctx, env.Client, quota)
	// envtest runs no quota controller: write the usage it would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{count: resource.MustParse("0")}}
	if err := env.Client.Status().Update(ctx, quota); err != nil {
		t.Fatalf("writing quota status: %v", err)
	}
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(1).Obj())
	waitPoolCondition(t, ns, "pool", extensionsv1beta1.PoolConditionMembersCreated, metav1.ConditionFalse, extensionsv1beta1.PoolReasonQuotaExceeded)
	waitPoolEvent(t, ns, "pool", extensionsv1beta1.PoolReasonQuotaExceeded)
}

// TestPoolConditionMembersNotReady: members that never become Ready are replaced after the
// grace period, and the pool says why it is not progressing.
func TestPoolConditionMembersNotReady(t *testing.T) {
	ns := env.Namespace(t)
	hash := blueprint.PoolHash("stuck")
	readiness.SetDecision(func(sb *agentsv1beta1.Sandbox) framework.Readiness {
		if sb.Namespace == ns && sb.Labels[agentsv1beta1.WarmPoolSandboxLabel] == hash {
			return framework.Pending
		}
		return framework.Ready
	})
	t.Cleanup(func() { readiness.SetDecision(nil) })
	ctx := framework.Context(t, framework.DefaultTimeout)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("stuck", ns, "tpl").Replicas(1).Obj())
	waitPoolCondition(t, ns, "stuck", extensionsv1beta1.PoolConditionProgressing, metav1.ConditionFalse, extensionsv1beta1.PoolReasonMembersNotReady)
	waitPoolEvent(t, ns, "stuck", extensionsv1beta1.PoolReasonMembersNotReady)
}

func waitPoolCondition(t *testing.T, ns, name, condType string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	framework.EventuallyWithin(t, 2*framework.DefaultTimeout, func(ctx context.Context) error {
		p := &extensionsv1beta1.SandboxWarmPool{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		return builder.HasCondition(p.Status.Conditions, condType, status, reason)
	})
}

func waitPoolEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == reason && e.InvolvedObject.Kind == "SandboxWarmPool" && e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no Warning event %s for pool %s", reason, name)
	})
}

func assertNoMembers(t *testing.T, ns, pool string) {
	t.Helper()
	var list agentsv1beta1.SandboxList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.WarmPoolSandboxLabel: blueprint.PoolHash(pool)}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("pool %s has %d members, want none", pool, len(list.Items))
	}
}
