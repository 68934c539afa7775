package autosize

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/autosize"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestAdmissionNamesTheBadAnnotation: the admission policy refuses every annotation value the
// controller would refuse, naming it, and admits the ones it accepts, the dev cluster's `base`
// pool among them.
func TestAdmissionNamesTheBadAnnotation(t *testing.T) {
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)
	// Bound to this namespace only: the other tests of the tier make pools with bad annotations on
	// purpose, to see the controller name them.
	framework.InstallAdmissionPolicy(t, ctx, env.Client, "autosize-policy.yaml", ns)
	on := func(kv ...string) map[string]string {
		a := map[string]string{extensionsv1beta1.AutosizeAnnotation: "true"}
		for i := 0; i+1 < len(kv); i += 2 {
			a[kv[i]] = kv[i+1]
		}
		return a
	}
	bad := []struct {
		annotations map[string]string
		want        string
	}{
		{map[string]string{extensionsv1beta1.AutosizeAnnotation: "yes"}, "metadata.annotations[paddock.dev/autosize]: yes must be true or false"},
		{on(extensionsv1beta1.AutosizeMinAnnotation, "two"), "metadata.annotations[paddock.dev/autosize-min]: two is not an integer from 0 to 10000"},
		{on(extensionsv1beta1.AutosizeMinAnnotation, "-1"), "metadata.annotations[paddock.dev/autosize-min]: -1 is not an integer"},
		{on(extensionsv1beta1.AutosizeMaxAnnotation, "0"), "metadata.annotations[paddock.dev/autosize-max]: 0 is not an integer from 1 to 10000"},
		{on(extensionsv1beta1.AutosizeMaxAnnotation, "10001"), "metadata.annotations[paddock.dev/autosize-max]: 10001 is not an integer"},
		{on(extensionsv1beta1.AutosizeHeadroomAnnotation, "1.5"), "metadata.annotations[paddock.dev/autosize-headroom]: 1.5 is not an integer from 0 to 10000"},
		{on(extensionsv1beta1.AutosizeMinAnnotation, "5", extensionsv1beta1.AutosizeMaxAnnotation, "3"), "metadata.annotations[paddock.dev/autosize-min]: 5 is above the maximum 3"},
		{on(extensionsv1beta1.AutosizeMinAnnotation, "11"), "metadata.annotations[paddock.dev/autosize-min]: 11 is above the maximum 10"},
	}
	for _, b := range bad {
		if _, _, err := autosize.FromAnnotations(b.annotations); err == nil {
			t.Errorf("the controller accepts %v, which admission refuses", b.annotations)
		}
	}
	// The policy takes effect a moment after it is created.
	framework.Eventually(t, func(ctx context.Context) error {
		for i, b := range bad {
			pool := builder.MakeWarmPool(fmt.Sprintf("bad-%d", i), ns, "tpl").Obj()
			pool.Annotations = b.annotations
			err := env.Client.Create(ctx, pool)
			if err == nil {
				_ = env.Client.Delete(ctx, pool)
				return fmt.Errorf("pool with %v admitted", b.annotations)
			}
			if !strings.Contains(err.Error(), b.want) {
				return fmt.Errorf("pool with %v refused with %q, want it to contain %q", b.annotations, err, b.want)
			}
		}
		return nil
	})

	base := devcluster.E2BPool()
	good := []map[string]string{
		on(),
		on(extensionsv1beta1.AutosizeMinAnnotation, "0", extensionsv1beta1.AutosizeMaxAnnotation, "10000", extensionsv1beta1.AutosizeHeadroomAnnotation, "0"),
		on(extensionsv1beta1.AutosizeMinAnnotation, "4", extensionsv1beta1.AutosizeMaxAnnotation, "4"),
		{extensionsv1beta1.AutosizeAnnotation: "false"},
		base.Annotations,
		nil,
	}
	for i, a := range good {
		if _, _, err := autosize.FromAnnotations(a); err != nil {
			t.Errorf("the controller refuses %v, which admission admits: %v", a, err)
		}
		pool := builder.MakeWarmPool(fmt.Sprintf("good-%d", i), ns, "tpl").Obj()
		pool.Annotations = a
		if err := env.Client.Create(ctx, pool, client.DryRunAll); err != nil {
			t.Errorf("pool with %v refused: %v", a, err)
		}
	}
}
