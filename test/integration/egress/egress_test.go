// Package egress proves on a real kube-apiserver that a template's default NetworkPolicy denies
// egress to the cluster's own ranges as discovered from its Nodes, ServiceCIDRs and the API
// server's EndpointSlices, and follows the Nodes as they change.
package egress

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
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
			opts.EgressProxyPorts = []int32{15001, 15053} // paddock-egress installed
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

// TestPolicedPodsGetAPolicyOfTheirOwn: with paddock-egress installed, a Managed template has two
// policies the API server accepts: the default one, which leaves Pods labelled policed out, and
// the policed Pods' one, which admits their egress to the egress ports only, at the nodes' pod
// gateways where the redirect lands (a policed Pod the node does not redirect reaches nothing). A custom policy and Unmanaged remove the second.
func TestPolicedPodsGetAPolicyOfTheirOwn(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	makeNode(t, ctx, "policed-node-a", "198.18.6.0/24", "198.18.2.11")
	tpl := builder.MakeTemplate("tpl", ns).Obj()
	framework.MustCreate(t, ctx, env.Client, tpl)
	policed := waitPolicy(t, ns, sandboxtemplate.PolicedPolicyName("tpl"), true)
	if sel := policed.Spec.PodSelector.MatchLabels; sel[egress.PolicedLabel] != "true" {
		t.Errorf("policed Pods' policy selects %v; want %s=true", sel, egress.PolicedLabel)
	}
	// The egress ports only at the nodes' pod gateways, where the redirect lands, in both
	// policies; a Node added later is followed.
	waitProxyAt(t, ns, "198.18.6.1/32")
	makeNode(t, ctx, "policed-node-b", "198.19.8.0/24", "198.19.0.4")
	waitProxyAt(t, ns, "198.19.8.1/32")
	def := waitPolicy(t, ns, sandboxtemplate.PolicyName("tpl"), true)
	if exprs := def.Spec.PodSelector.MatchExpressions; len(exprs) != 1 || exprs[0].Key != egress.PolicedLabel || exprs[0].Operator != metav1.LabelSelectorOpDoesNotExist {
		t.Errorf("the default policy's selector %+v does not leave policed Pods out", def.Spec.PodSelector)
	}

	// A custom policy applies as written, to every Pod of the template.
	updateTemplate(t, ctx, tpl, func() {
		tpl.Spec.NetworkPolicy = &extensionsv1beta1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}}
	})
	waitPolicy(t, ns, sandboxtemplate.PolicedPolicyName("tpl"), false)
	if def := waitPolicy(t, ns, sandboxtemplate.PolicyName("tpl"), true); len(def.Spec.PodSelector.MatchExpressions) != 0 {
		t.Errorf("the custom policy's selector %+v leaves Pods out", def.Spec.PodSelector)
	}

	// Back to the default, then Unmanaged: both go.
	updateTemplate(t, ctx, tpl, func() { tpl.Spec.NetworkPolicy = nil })
	waitPolicy(t, ns, sandboxtemplate.PolicedPolicyName("tpl"), true)
	updateTemplate(t, ctx, tpl, func() { tpl.Spec.NetworkPolicyManagement = extensionsv1beta1.NetworkPolicyManagementUnmanaged })
	waitPolicy(t, ns, sandboxtemplate.PolicedPolicyName("tpl"), false)
	waitPolicy(t, ns, sandboxtemplate.PolicyName("tpl"), false)
}

// updateTemplate applies change to the API server's current tpl.
func updateTemplate(t *testing.T, ctx context.Context, tpl *extensionsv1beta1.SandboxTemplate, change func()) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: tpl.Namespace, Name: tpl.Name}, tpl); err != nil {
			return err
		}
		change()
		return env.Client.Update(ctx, tpl)
	})
	if err != nil {
		t.Fatalf("updating SandboxTemplate %s: %v", tpl.Name, err)
	}
}

// waitPolicy waits until the NetworkPolicy name exists (and returns it) or is gone.
func waitPolicy(t *testing.T, ns, name string, exists bool) *networkingv1.NetworkPolicy {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	framework.Eventually(t, func(ctx context.Context) error {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, np)
		switch {
		case exists:
			return err
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("NetworkPolicy %s still exists", name)
	})
	return np
}

// waitProxyAt waits until the policed Pods' policy admits the egress ports at want, and only at
// single node addresses (other tests' Nodes add theirs), and the default policy's egress-ports
// rule says the same.
func waitProxyAt(t *testing.T, ns, want string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		for _, name := range []string{sandboxtemplate.PolicedPolicyName("tpl"), sandboxtemplate.PolicyName("tpl")} {
			np := &networkingv1.NetworkPolicy{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, np); err != nil {
				return err
			}
			var rule *networkingv1.NetworkPolicyEgressRule
			for i := range np.Spec.Egress {
				if len(np.Spec.Egress[i].Ports) > 0 {
					rule = &np.Spec.Egress[i]
				}
			}
			if rule == nil {
				return fmt.Errorf("NetworkPolicy %s has no egress-ports rule: %+v", name, np.Spec.Egress)
			}
			var at []string
			for _, peer := range rule.To {
				if peer.IPBlock == nil || !strings.HasSuffix(peer.IPBlock.CIDR, "/32") || len(peer.IPBlock.Except) > 0 || peer.PodSelector != nil || peer.NamespaceSelector != nil {
					return fmt.Errorf("NetworkPolicy %s admits the egress ports at %+v; want single node addresses only", name, peer)
				}
				at = append(at, peer.IPBlock.CIDR)
			}
			if !slices.Contains(at, want) {
				return fmt.Errorf("NetworkPolicy %s admits the egress ports at %v; want %s among them", name, at, want)
			}
		}
		return nil
	})
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
