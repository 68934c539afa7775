package extensions

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestClaimIdentityReachesThePod runs the real Sandbox controller, scoped to this test's
// namespace, instead of the stand-in: the warm member's Pod, made Ready by the test as a kubelet
// would, carries the claim's UID label and name annotation once the claim adopts its Sandbox.
func TestClaimIdentityReachesThePod(t *testing.T) {
	h := controllers(t)
	ns := env.Namespace(t)
	h.readiness.SetDecision(func(sb *agentsv1beta1.Sandbox) framework.Readiness {
		if sb.Namespace == ns {
			return framework.Pending // the real Sandbox controller owns this namespace's status
		}
		return framework.Ready
	})
	stop, err := env.StartManager(func(mgr ctrl.Manager) error {
		r, err := sandbox.New(mgr.GetClient(), mgr.GetEventRecorder("sandbox-controller"), sandbox.DefaultOptions())
		if err != nil {
			return err
		}
		return r.SetupWithManager(mgr)
	}, func(o *manager.Options) {
		o.Cache.DefaultNamespaces = map[string]cache.Config{ns: {}}
		o.Controller.SkipNameValidation = ptr.To(true)
	})
	if err != nil {
		t.Fatalf("starting the Sandbox controller: %v", err)
	}
	t.Cleanup(stop)

	create(t, builder.MakeTemplate("tpl", ns).Obj())
	create(t, builder.MakeWarmPool("pool", ns, "tpl").Replicas(1).Obj())
	var pod corev1.Pod
	framework.Eventually(t, func(ctx context.Context) error {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d Pods, want the member's one", len(pods.Items))
		}
		pod = pods.Items[0]
		_, err := framework.MarkPodReady(ctx, env.Client, client.ObjectKeyFromObject(&pod))
		return err
	})
	waitPoolReady(t, ns, "pool", 1)

	create(t, builder.MakeClaim("c", ns, "pool").Obj())
	claim, sb := waitClaimReady(t, ns, "c")
	if sb.Name != pod.Name {
		t.Fatalf("claim bound %s, want the warm member %s", sb.Name, pod.Name)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		p, err := get(ctx, ns, pod.Name, &corev1.Pod{})
		if err != nil {
			return err
		}
		if p.Labels[agentsv1beta1.ClaimUIDLabel] != string(claim.UID) || p.Annotations[agentsv1beta1.ClaimNameAnnotation] != "c" {
			return fmt.Errorf("Pod labels %v annotations %v lack the claim's identity", p.Labels, p.Annotations)
		}
		if _, ok := p.Labels[agentsv1beta1.WarmPoolSandboxLabel]; ok {
			return fmt.Errorf("Pod still carries the pool label")
		}
		return nil
	})
}
