package autosize

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/autosize"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// installAdmissionPolicy applies config/admission/autosize-policy.yaml, the file the bundles and
// the chart ship, with its binding limited to namespace ns: the other tests of this tier make
// pools with bad annotations on purpose, to see the controller name them.
func installAdmissionPolicy(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "admission", "autosize-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "ValidatingAdmissionPolicyBinding" {
			u.SetName(u.GetName() + "-" + ns)
			if err := unstructured.SetNestedStringMap(u.Object, map[string]string{"kubernetes.io/metadata.name": ns},
				"spec", "matchResources", "namespaceSelector", "matchLabels"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
		}
		if err := env.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// TestAdmissionNamesTheBadAnnotation: the admission policy refuses every annotation value the
// controller would refuse, naming it, and admits the ones it accepts, the dev cluster's `base`
// pool among them.
func TestAdmissionNamesTheBadAnnotation(t *testing.T) {
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)
	installAdmissionPolicy(t, ctx, ns)
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
