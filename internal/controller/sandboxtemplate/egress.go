package sandboxtemplate

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/egress"
)

// The API server's own Service, whose EndpointSlices carry its addresses.
const (
	apiServerServiceNamespace = "default"
	apiServerServiceName      = "kubernetes"
)

// egressDeny returns the ranges the template's default policy denies. Templates with their own
// networkPolicy need none.
func (r *Reconciler) egressDeny(ctx context.Context, tpl *extensionsv1beta1.SandboxTemplate) (v4, v6 []string, err error) {
	if tpl.Spec.NetworkPolicy != nil || r.opts.EgressDenyCIDRs != nil || !r.opts.EgressDiscovery {
		return egress.Deny(r.opts.EgressDenyCIDRs, egress.Discovered{})
	}
	d, err := r.discover(ctx)
	if err != nil {
		return nil, nil, err
	}
	return egress.Deny(nil, d)
}

// egressProxyAddresses are the node addresses a policed Pod's redirected traffic reaches, where
// the default policies admit the egress ports (nil: no egress ports, a custom policy, or no Node
// with an IPv4 pod range, where the controller cannot know them and admits any address).
func (r *Reconciler) egressProxyAddresses(ctx context.Context, tpl *extensionsv1beta1.SandboxTemplate) ([]string, error) {
	if len(r.opts.EgressProxyPorts) == 0 || tpl.Spec.NetworkPolicy != nil {
		return nil, nil
	}
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing Nodes for the addresses of the egress ports (--sandbox-egress-proxy-ports): %w", err)
	}
	var podCIDRs []string
	for _, n := range nodes.Items {
		podCIDRs = append(podCIDRs, n.Spec.PodCIDRs...)
	}
	at := egress.RedirectAddresses(podCIDRs)
	if len(at) == 0 {
		ctrl.LoggerFrom(ctx).V(2).Info("No Node has an IPv4 pod range: the egress ports are admitted at any address")
	}
	return at, nil
}

// discover reads the cluster's own address ranges. ServiceCIDR objects are optional: clusters
// that do not serve networking.k8s.io/v1 ServiceCIDRs are covered by the other sources.
func (r *Reconciler) discover(ctx context.Context) (egress.Discovered, error) {
	var d egress.Discovered
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes); err != nil {
		return d, fmt.Errorf("listing Nodes for the sandboxes' egress deny ranges (or set --sandbox-egress-deny-cidrs): %w", err)
	}
	for _, n := range nodes.Items {
		d.PodCIDRs = append(d.PodCIDRs, n.Spec.PodCIDRs...)
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				d.NodeIPs = append(d.NodeIPs, a.Address)
			}
		}
	}
	var cidrs networkingv1.ServiceCIDRList
	switch err := r.client.List(ctx, &cidrs); {
	case err == nil:
		for _, c := range cidrs.Items {
			d.ServiceCIDRs = append(d.ServiceCIDRs, c.Spec.CIDRs...)
		}
	case meta.IsNoMatchError(err):
		ctrl.LoggerFrom(ctx).V(4).Info("ServiceCIDRs are not served; the Service range is not discovered")
	default:
		return d, fmt.Errorf("listing ServiceCIDRs for the sandboxes' egress deny ranges (or set --sandbox-egress-deny-cidrs): %w", err)
	}
	var eps discoveryv1.EndpointSliceList
	if err := r.opts.APIReader.List(ctx, &eps, client.InNamespace(apiServerServiceNamespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: apiServerServiceName}); err != nil {
		return d, fmt.Errorf("listing the EndpointSlices of Service %s/%s for the sandboxes' egress deny ranges (or set --sandbox-egress-deny-cidrs): %w",
			apiServerServiceNamespace, apiServerServiceName, err)
	}
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			d.APIServerIPs = append(d.APIServerIPs, e.Addresses...)
		}
	}
	return d, nil
}

// allTemplates maps a Node event to every template: the deny ranges and the egress ports'
// addresses are cluster-wide.
func (r *Reconciler) allTemplates(ctx context.Context, _ client.Object) []reconcile.Request {
	if (r.opts.EgressDenyCIDRs != nil || !r.opts.EgressDiscovery) && len(r.opts.EgressProxyPorts) == 0 {
		return nil
	}
	var list extensionsv1beta1.SandboxTemplateList
	if err := r.client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing SandboxTemplates to refresh their egress deny ranges")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: t.Namespace, Name: t.Name}})
	}
	return out
}

// nodeAddressesChanged passes Node events that can move the deny ranges or the egress ports'
// addresses: a Node added or removed, or its podCIDRs or InternalIPs changed. Status heartbeats
// do not pass.
func nodeAddressesChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Node)
			n, ok2 := e.ObjectNew.(*corev1.Node)
			return !ok1 || !ok2 || !slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) || !slices.Equal(internalIPs(o), internalIPs(n))
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

func internalIPs(n *corev1.Node) []string {
	var out []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			out = append(out, a.Address)
		}
	}
	return out
}
