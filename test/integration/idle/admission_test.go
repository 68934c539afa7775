package idle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

func TestAdmissionNamesTheBadAnnotation(t *testing.T) {
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)
	framework.InstallAdmissionPolicy(t, ctx, env.Client, "idle-policy.yaml", "")
	bad := []struct {
		obj  client.Object
		want string
	}{
		{builder.MakeSandbox("bad-timeout", ns).Annotation(agentsv1beta1.IdleTimeoutAnnotation, "soon").Obj(),
			"metadata.annotations[paddock.dev/idle-timeout]: soon is not a non-negative Go duration"},
		{builder.MakeSandbox("negative", ns).Annotation(agentsv1beta1.IdleTimeoutAnnotation, "-5m").Obj(),
			"metadata.annotations[paddock.dev/idle-timeout]"},
		{builder.MakeClaim("bad-wake", ns, "pool").Annotation(agentsv1beta1.WakeOnRequestAnnotation, "yes").Obj(),
			"metadata.annotations[paddock.dev/wake-on-request]: yes must be true or false"},
		{builder.MakeTemplate("bad-tpl", ns).Image("busybox").Annotation(agentsv1beta1.IdleTimeoutAnnotation, "15").Obj(),
			"metadata.annotations[paddock.dev/idle-timeout]: 15 is not"},
	}
	// The policy takes effect a moment after it is created.
	framework.Eventually(t, func(ctx context.Context) error {
		for _, b := range bad {
			obj := b.obj.DeepCopyObject().(client.Object)
			err := env.Client.Create(ctx, obj)
			if err == nil {
				_ = env.Client.Delete(ctx, obj)
				return fmt.Errorf("%s %s admitted", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
			}
			if !strings.Contains(err.Error(), b.want) {
				return fmt.Errorf("%s refused with %q, want it to contain %q", obj.GetName(), err, b.want)
			}
		}
		return nil
	})
	for _, good := range []client.Object{
		builder.MakeSandbox("good", ns).Annotation(agentsv1beta1.IdleTimeoutAnnotation, "1h30m").Annotation(agentsv1beta1.WakeOnRequestAnnotation, "false").Obj(),
		builder.MakeSandbox("off", ns).Annotation(agentsv1beta1.IdleTimeoutAnnotation, "0").Obj(),
		builder.MakeSandbox("none", ns).Obj(),
	} {
		if err := env.Client.Create(ctx, good); err != nil {
			var status apierrors.APIStatus
			errors.As(err, &status)
			t.Errorf("valid %s refused: %v", good.GetName(), err)
		}
	}
}
