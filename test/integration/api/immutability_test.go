package api

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

func TestVolumeClaimTemplatesAreImmutable(t *testing.T) {
	ns := env.Namespace(t)
	const message = "volumeClaimTemplates is immutable"

	tests := []struct {
		name   string
		start  *agentsv1beta1.Sandbox
		change func(*agentsv1beta1.Sandbox)
	}{
		{
			name:  "resize",
			start: builder.MakeSandbox("resize", ns).VolumeClaim("data", "1Gi").Obj(),
			change: func(sb *agentsv1beta1.Sandbox) {
				sb.Spec.VolumeClaimTemplates[0] = builder.VolumeClaimTemplate("data", "2Gi")
			},
		},
		{
			name:  "add to none",
			start: builder.MakeSandbox("add", ns).Obj(),
			change: func(sb *agentsv1beta1.Sandbox) {
				sb.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{builder.VolumeClaimTemplate("data", "1Gi")}
			},
		},
		{
			name:   "remove all",
			start:  builder.MakeSandbox("remove", ns).VolumeClaim("data", "1Gi").Obj(),
			change: func(sb *agentsv1beta1.Sandbox) { sb.Spec.VolumeClaimTemplates = nil },
		},
		{
			name:  "append",
			start: builder.MakeSandbox("append", ns).VolumeClaim("data", "1Gi").Obj(),
			change: func(sb *agentsv1beta1.Sandbox) {
				sb.Spec.VolumeClaimTemplates = append(sb.Spec.VolumeClaimTemplates, builder.VolumeClaimTemplate("cache", "1Gi"))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := framework.Context(t, 30*time.Second)
			sb := create(t, tt.start)
			stored := sb.DeepCopy()
			tt.change(sb)
			err := env.Client.Update(ctx, sb)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), message) {
				t.Fatalf("update returned %v, want Invalid with %q", err, message)
			}
			got := &agentsv1beta1.Sandbox{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
				t.Fatalf("reading back: %v", err)
			}
			if diff := cmp.Diff(stored.Spec.VolumeClaimTemplates, got.Spec.VolumeClaimTemplates); diff != "" {
				t.Errorf("stored volumeClaimTemplates changed after a rejected update (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("other fields stay mutable", func(t *testing.T) {
		ctx := framework.Context(t, 30*time.Second)
		sb := create(t, builder.MakeSandbox("mutable", ns).VolumeClaim("data", "1Gi").Obj())
		sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
		sb.Spec.PodTemplate.Spec.Containers[0].Image = "registry.invalid/other:v2"
		sb.Spec.ShutdownTime = nil
		if err := env.Client.Update(ctx, sb); err != nil {
			t.Fatalf("updating operatingMode and podTemplate: %v", err)
		}
	})
}
