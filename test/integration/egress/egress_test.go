// Package egress proves on a real kube-apiserver that a template's default NetworkPolicy denies
// egress to the cluster's own ranges as discovered from its Nodes, ServiceCIDRs and the API
// server's EndpointSlices, and follows the Nodes as they change.
package egress

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		return e.StartManager(func(mgr ctrl.Manager) error {
			opts := sandboxtemplate.DefaultOptions()
			opts.APIReader = mgr.GetAPIReader()
			r, err := sandboxtemplate.New(mgr.GetClient(), nil, opts)
			if err != nil {
				return err
			}
			return r.SetupWithManager(mgr)
		})
	})
}

// TestDefaultPolicyDeniesDiscoveredRanges: Nodes in 198.18.0.0/15 (this project's own cluster
// range, outside RFC 1918) and the Service range end up in the policy's egress exceptions,
// and a Node added later is followed.
func TestDefaultPolicyDeniesDiscoveredRanges(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	makeNode(t, ctx, "egress-node-a", "198.18.4.0/24", "198.18.2.10")
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())

	// framework.ServiceCIDR is the API server's Service range, served as the default ServiceCIDR.
	waitExcepts(t, ns, "198.18.4.0/24", "198.18.2.10/32", framework.ServiceCIDR, "10.0.0.0/8", "169.254.0.0/16")
	makeNode(t, ctx, "egress-node-b", "198.19.7.0/24", "198.19.0.3")
	waitExcepts(t, ns, "198.19.7.0/24", "198.19.0.3/32")
}

func makeNode(t *testing.T, ctx context.Context, name, podCIDR, ip string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}}}
	framework.MustCreate(t, ctx, env.Client, node)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	if err := env.Client.Status().Update(ctx, node); err != nil {
		t.Fatalf("writing Node %s addresses: %v", name, err)
	}
}

// waitExcepts waits until the template's policy excepts every one of want from its IPv4 egress.
func waitExcepts(t *testing.T, ns string, want ...string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		np := &networkingv1.NetworkPolicy{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: sandboxtemplate.PolicyName("tpl")}, np); err != nil {
			return err
		}
		var except []string
		for _, rule := range np.Spec.Egress {
			for _, peer := range rule.To {
				if peer.IPBlock != nil && peer.IPBlock.CIDR == "0.0.0.0/0" {
					except = peer.IPBlock.Except
				}
			}
		}
		for _, w := range want {
			if !slices.Contains(except, w) {
				return fmt.Errorf("egress of 0.0.0.0/0 excepts %v, missing %s", except, w)
			}
		}
		return nil
	})
}
