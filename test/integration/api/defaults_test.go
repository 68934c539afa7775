package api

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// create creates obj and reads it back, so the test sees what the API server stored.
func create[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	ctx := framework.Context(t, 30*time.Second)
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("reading back %T %s: %v", obj, obj.GetName(), err)
	}
	return obj
}

func TestSandboxDefaults(t *testing.T) {
	ns := env.Namespace(t)
	sb := create(t, builder.MakeSandbox("defaults", ns).Obj())

	if diff := cmp.Diff(agentsv1beta1.SandboxOperatingModeRunning, sb.Spec.OperatingMode); diff != "" {
		t.Errorf("spec.operatingMode (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ptr.To(agentsv1beta1.ShutdownPolicyRetain), sb.Spec.ShutdownPolicy); diff != "" {
		t.Errorf("spec.shutdownPolicy (-want +got):\n%s", diff)
	}
	if sb.Spec.Service != nil {
		t.Errorf("spec.service = %v, want unset (no default)", *sb.Spec.Service)
	}
}

func TestTemplateDefaults(t *testing.T) {
	ns := env.Namespace(t)
	tpl := create(t, builder.MakeTemplate("defaults", ns).Obj())

	want := extensionsv1beta1.SandboxTemplateSpec{
		SandboxBlueprint:           tpl.Spec.SandboxBlueprint,
		NetworkPolicyManagement:    extensionsv1beta1.NetworkPolicyManagementManaged,
		EnvVarsInjectionPolicy:     extensionsv1beta1.EnvVarsInjectionPolicyDisallowed,
		VolumeClaimTemplatesPolicy: extensionsv1beta1.VolumeClaimTemplatesPolicyDisallowed,
	}
	if diff := cmp.Diff(want, tpl.Spec); diff != "" {
		t.Errorf("template spec (-want +got):\n%s", diff)
	}
}

func TestWarmPoolDefaults(t *testing.T) {
	ns := env.Namespace(t)

	t.Run("replicas", func(t *testing.T) {
		pool := create(t, builder.MakeWarmPool("no-replicas", ns, "tpl").Obj())
		if diff := cmp.Diff(ptr.To[int32](1), pool.Spec.Replicas); diff != "" {
			t.Errorf("spec.replicas (-want +got):\n%s", diff)
		}
		if pool.Spec.UpdateStrategy != nil {
			t.Errorf("spec.updateStrategy = %+v, want unset", pool.Spec.UpdateStrategy)
		}
	})
	t.Run("updateStrategy type", func(t *testing.T) {
		pool := builder.MakeWarmPool("empty-strategy", ns, "tpl").Obj()
		pool.Spec.UpdateStrategy = &extensionsv1beta1.SandboxWarmPoolUpdateStrategy{}
		pool = create(t, pool)
		want := &extensionsv1beta1.SandboxWarmPoolUpdateStrategy{Type: extensionsv1beta1.OnReplenishSandboxWarmPoolUpdateStrategyType}
		if diff := cmp.Diff(want, pool.Spec.UpdateStrategy); diff != "" {
			t.Errorf("spec.updateStrategy (-want +got):\n%s", diff)
		}
	})
	t.Run("explicit zero replicas kept", func(t *testing.T) {
		pool := create(t, builder.MakeWarmPool("zero", ns, "tpl").Replicas(0).Obj())
		if diff := cmp.Diff(ptr.To[int32](0), pool.Spec.Replicas); diff != "" {
			t.Errorf("spec.replicas (-want +got):\n%s", diff)
		}
	})
}

func TestClaimDefaults(t *testing.T) {
	ns := env.Namespace(t)

	t.Run("no lifecycle", func(t *testing.T) {
		claim := create(t, builder.MakeClaim("no-lifecycle", ns, "pool").Obj())
		if claim.Spec.Lifecycle != nil {
			t.Errorf("spec.lifecycle = %+v, want unset", claim.Spec.Lifecycle)
		}
	})
	t.Run("lifecycle shutdownPolicy", func(t *testing.T) {
		claim := create(t, builder.MakeClaim("lifecycle", ns, "pool").Lifecycle(extensionsv1beta1.Lifecycle{TTLSecondsAfterFinished: ptr.To[int32](60)}).Obj())
		want := &extensionsv1beta1.Lifecycle{
			TTLSecondsAfterFinished: ptr.To[int32](60),
			ShutdownPolicy:          extensionsv1beta1.ShutdownPolicyRetain,
		}
		if diff := cmp.Diff(want, claim.Spec.Lifecycle); diff != "" {
			t.Errorf("spec.lifecycle (-want +got):\n%s", diff)
		}
	})
}
