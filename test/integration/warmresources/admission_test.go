package warmresources

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/podresize"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestAdmissionNamesTheField: the admission policy refuses bad pool annotations and claims whose
// resources are not quantities, not choosable or above their pool's bounds, naming the annotation,
// exactly where the controllers refuse them; it admits what they accept.
func TestAdmissionNamesTheField(t *testing.T) {
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)
	// Bound to this namespace only: the other tests make claims the controller refuses on purpose.
	framework.InstallAdmissionPolicy(t, ctx, env.Client, "warm-resources-policy.yaml", ns)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	bounded := builder.MakeWarmPool("bounded", ns, "tpl").Replicas(0).
		Annotation(extensionsv1beta1.ClaimCPUMaxAnnotation, "2").Annotation(extensionsv1beta1.ClaimMemoryMaxAnnotation, "1Gi").Obj()
	cpuOnly := builder.MakeWarmPool("cpu-only", ns, "tpl").Replicas(0).Annotation(extensionsv1beta1.ClaimCPUMaxAnnotation, "500m").Obj()

	badPools := []struct {
		key, value, want string
	}{
		{extensionsv1beta1.IdleCPUAnnotation, "lots", "metadata.annotations[paddock.dev/idle-cpu]: lots is not a quantity above zero; set for example 500m"},
		{extensionsv1beta1.IdleMemoryAnnotation, "0", "metadata.annotations[paddock.dev/idle-memory]: 0 is not a quantity above zero; set for example 256Mi"},
		{extensionsv1beta1.ClaimCPUMaxAnnotation, "-1", "metadata.annotations[paddock.dev/claim-cpu-max]: -1 is not a quantity above zero"},
		{extensionsv1beta1.ClaimMemoryMaxAnnotation, "1GB!", "metadata.annotations[paddock.dev/claim-memory-max]: 1GB! is not a quantity above zero"},
	}
	for _, b := range badPools {
		a := map[string]string{b.key: b.value}
		_, errIdle := podresize.Idle(a)
		_, errBounds := podresize.Bounds(a)
		if errIdle == nil && errBounds == nil {
			t.Errorf("the controllers accept %v, which admission refuses", a)
		}
	}
	// The policies take effect a moment after they are created.
	framework.Eventually(t, func(ctx context.Context) error {
		for i, b := range badPools {
			pool := builder.MakeWarmPool(fmt.Sprintf("bad-%d", i), ns, "tpl").Annotation(b.key, b.value).Obj()
			err := env.Client.Create(ctx, pool, client.DryRunAll)
			if err == nil {
				return fmt.Errorf("pool with %s=%s admitted", b.key, b.value)
			}
			if !strings.Contains(err.Error(), b.want) {
				return fmt.Errorf("pool with %s=%s refused with %q, want it to contain %q", b.key, b.value, err, b.want)
			}
		}
		return nil
	})
	framework.MustCreate(t, ctx, env.Client, bounded)
	framework.MustCreate(t, ctx, env.Client, cpuOnly)
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("idle", ns, "tpl").Replicas(0).
		Annotation(extensionsv1beta1.IdleCPUAnnotation, "10m").Annotation(extensionsv1beta1.IdleMemoryAnnotation, "32Mi").Obj())

	claim := func(pool string, kv ...string) *extensionsv1beta1.SandboxClaim {
		w := builder.MakeClaim("c", ns, pool)
		for i := 0; i+1 < len(kv); i += 2 {
			w.Annotation(kv[i], kv[i+1])
		}
		return w.Obj()
	}
	badClaims := []struct {
		claim *extensionsv1beta1.SandboxClaim
		pool  *extensionsv1beta1.SandboxWarmPool
		want  string
	}{
		{claim("bounded", extensionsv1beta1.CPUAnnotation, "3"), bounded,
			`metadata.annotations[paddock.dev/cpu]: 3 is above paddock.dev/claim-cpu-max 2 of SandboxWarmPool "bounded"; ask for at most 2`},
		{claim("bounded", extensionsv1beta1.MemoryAnnotation, "2Gi"), bounded,
			`metadata.annotations[paddock.dev/memory]: 2Gi is above paddock.dev/claim-memory-max 1Gi of SandboxWarmPool "bounded"; ask for at most 1Gi`},
		{claim("bounded", extensionsv1beta1.CPUAnnotation, "two"), bounded,
			`metadata.annotations[paddock.dev/cpu]: two is not a quantity above zero; set for example 500m`},
		{claim("cpu-only", extensionsv1beta1.CPUAnnotation, "250m", extensionsv1beta1.MemoryAnnotation, "64Mi"), cpuOnly,
			`metadata.annotations[paddock.dev/memory]: SandboxWarmPool "cpu-only" does not let claims choose this resource; remove the annotation or set paddock.dev/claim-memory-max on the pool`},
	}
	for _, b := range badClaims {
		if err := controllerCheck(b.claim, b.pool); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("the controller's check of %v = %v, want %q", b.claim.Annotations, err, b.want)
		}
	}
	framework.Eventually(t, func(ctx context.Context) error {
		for _, b := range badClaims {
			err := env.Client.Create(ctx, b.claim.DeepCopy(), client.DryRunAll)
			if err == nil {
				return fmt.Errorf("claim with %v admitted", b.claim.Annotations)
			}
			if !strings.Contains(err.Error(), b.want) {
				return fmt.Errorf("claim with %v refused with %q, want it to contain %q", b.claim.Annotations, err, b.want)
			}
		}
		return nil
	})

	good := []*extensionsv1beta1.SandboxClaim{
		claim("bounded", extensionsv1beta1.CPUAnnotation, "2", extensionsv1beta1.MemoryAnnotation, "1Gi"),
		claim("bounded", extensionsv1beta1.CPUAnnotation, "1500m"),
		claim("cpu-only", extensionsv1beta1.CPUAnnotation, "0.5"),
		claim("idle"), // a claim that chooses nothing needs no bounds
		claim("no-such-pool", extensionsv1beta1.CPUAnnotation, "1"), // the controller answers WarmPoolNotFound
	}
	for _, c := range good {
		if err := env.Client.Create(ctx, c, client.DryRunAll); err != nil {
			t.Errorf("claim of pool %s with %v refused: %v", c.Spec.WarmPoolRef.Name, c.Annotations, err)
		}
	}
}

// controllerCheck is the claim controller's check (internal/podresize), for comparison.
func controllerCheck(c *extensionsv1beta1.SandboxClaim, pool *extensionsv1beta1.SandboxWarmPool) error {
	asked, err := podresize.Requested(c.Annotations)
	if err != nil {
		return err
	}
	bounds, err := podresize.Bounds(pool.Annotations)
	if err != nil {
		return err
	}
	return podresize.Check(asked, bounds, pool.Name)
}
