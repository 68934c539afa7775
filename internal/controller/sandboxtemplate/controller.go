package sandboxtemplate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/kube"
)

// Options configure the controller.
type Options struct {
	// Workers is --sandbox-template-concurrent-workers (default 1).
	Workers int
	// RouterNamespace and RouterPodLabels select the router Pods the default policy admits
	// (default paddock-system, app=paddock-router: where Paddock's install puts paddock-router).
	RouterNamespace string
	RouterPodLabels map[string]string
	// ControllerNamespace and ControllerPodLabels select the controller's own Pods, which the
	// default policy admits too: the controller calls sandboxd for claim settings and idle
	// activity (default paddock-system, app.kubernetes.io/name=paddock-controller).
	ControllerNamespace string
	ControllerPodLabels map[string]string
	// ClientPodLabels, when set, select the Pods of the template's own namespace that the default
	// policy admits as well: the clients the namespace labels (manager --sandbox-client-pod-labels).
	ClientPodLabels map[string]string
	// EgressDenyCIDRs is --sandbox-egress-deny-cidrs: when not nil, the ranges the default policy
	// denies besides egress.Defaults, in place of discovery.
	EgressDenyCIDRs []string
	// EgressDiscovery is --sandbox-egress-discovery (default true): deny the cluster's own pod,
	// node, Service and API server ranges as found in its Nodes, ServiceCIDRs and the
	// kubernetes Service's EndpointSlices.
	EgressDiscovery bool
	// EgressProxyPorts is --sandbox-egress-proxy-ports: the default policy admits egress to these
	// ports (TCP and UDP) at any address, where paddock-egress's redirect delivers policed Pods'
	// traffic (docs/design/egress.md). Empty admits none.
	EgressProxyPorts []int32
	// APIReader is the uncached reader (the manager's GetAPIReader) of the API server's
	// EndpointSlices (one namespace's slices are not worth a cluster-wide informer); the client
	// when nil.
	APIReader client.Reader
}

// Defaults of the options. The router defaults name Paddock's install (config/router, the Helm
// chart); the manager's flags default to them.
const (
	DefaultWorkers             = 1
	DefaultRouterNamespace     = "paddock-system"
	DefaultControllerNamespace = "paddock-system"
)

// DefaultRouterPodLabels returns the labels of the paddock-router Pods of Paddock's install.
func DefaultRouterPodLabels() map[string]string { return map[string]string{"app": "paddock-router"} }

// DefaultControllerPodLabels returns the labels of the paddock-controller Pods of Paddock's install.
func DefaultControllerPodLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "paddock-controller"}
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{Workers: DefaultWorkers, RouterNamespace: DefaultRouterNamespace, RouterPodLabels: DefaultRouterPodLabels(),
		ControllerNamespace: DefaultControllerNamespace, ControllerPodLabels: DefaultControllerPodLabels(), EgressDiscovery: true}
}

// ReasonPolicyNotControlled is the Warning event of a template whose NetworkPolicy name is taken
// by a policy it does not control: the template's sandboxes are not isolated as it says.
const ReasonPolicyNotControlled = "NetworkPolicyNotControlled"

// ReasonPolicyInvalid is the Warning event of a template whose NetworkPolicy the API server
// refuses as invalid: its spec.networkPolicy needs fixing, and it is not retried until then.
const ReasonPolicyInvalid = "NetworkPolicyInvalid"

// Reconciler reconciles SandboxTemplates.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	opts     Options
}

// New returns a Reconciler that reads and writes through c (normally the manager's cached
// client) and emits events with recorder (none when nil). Start from DefaultOptions: New fills
// only the zero fields whose zero means nothing (workers, router and controller selection,
// reader); a negative
// one is an error naming it. The template controller reads no time, so it has no clock.
func New(c client.Client, recorder events.EventRecorder, opts Options) (*Reconciler, error) {
	if err := kube.CheckClient("sandbox template", c); err != nil {
		return nil, err
	}
	if opts.Workers < 0 {
		return nil, fmt.Errorf("sandbox template reconciler option Workers is %d; set at least 1", opts.Workers)
	}
	def := DefaultOptions()
	opts.Workers = cmp.Or(opts.Workers, def.Workers)
	opts.RouterNamespace = cmp.Or(opts.RouterNamespace, def.RouterNamespace)
	if len(opts.RouterPodLabels) == 0 {
		opts.RouterPodLabels = def.RouterPodLabels
	}
	opts.RouterPodLabels = maps.Clone(opts.RouterPodLabels) // the caller's map stays theirs
	opts.ControllerNamespace = cmp.Or(opts.ControllerNamespace, def.ControllerNamespace)
	if len(opts.ControllerPodLabels) == 0 {
		opts.ControllerPodLabels = def.ControllerPodLabels
	}
	opts.ControllerPodLabels = maps.Clone(opts.ControllerPodLabels)
	opts.APIReader = cmp.Or[client.Reader](opts.APIReader, c)
	return &Reconciler{client: c, recorder: kube.Recorder(recorder), opts: opts}, nil
}

// Reconcile labels the template and brings its NetworkPolicy in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tpl := &extensionsv1beta1.SandboxTemplate{}
	if err := r.client.Get(ctx, req.NamespacedName, tpl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tpl.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if err := r.ensureRefHashLabel(ctx, tpl); err != nil {
		return ctrl.Result{}, err
	}
	if tpl.Spec.NetworkPolicyManagement == extensionsv1beta1.NetworkPolicyManagementUnmanaged {
		if err := r.deleteControlledPolicy(ctx, tpl, PolicedPolicyName(tpl.Name)); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.deleteControlledPolicy(ctx, tpl, PolicyName(tpl.Name))
	}
	deny4, deny6, err := r.egressDeny(ctx, tpl)
	if err != nil {
		return ctrl.Result{}, err
	}
	proxyAt, err := r.egressProxyAddresses(ctx, tpl)
	if err != nil {
		return ctrl.Result{}, err
	}
	def, policed := constructPolicy(tpl, r.opts, deny4, deny6, proxyAt)
	// The policed Pods' policy comes first and goes last: they are never left with neither.
	if policed != nil {
		if err := r.applyPolicy(ctx, tpl, policed); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.refusedPolicy(tpl, r.applyPolicy(ctx, tpl, def)); err != nil || policed != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.deleteControlledPolicy(ctx, tpl, PolicedPolicyName(tpl.Name))
}

// refusedPolicy turns a policy the API server refuses as invalid, which was built from the
// template's spec.networkPolicy, into a Warning event and a terminal error: the template has no
// status to say it in, and sending it again cannot succeed until the template changes.
func (r *Reconciler) refusedPolicy(tpl *extensionsv1beta1.SandboxTemplate, err error) error {
	terminal := kube.RefusedAsInvalid(err)
	if errors.Is(terminal, reconcile.TerminalError(nil)) {
		r.recorder.Eventf(tpl, nil, corev1.EventTypeWarning, ReasonPolicyInvalid, "Reconciling",
			"The API server refuses the NetworkPolicy built from spec.networkPolicy; fix spec.networkPolicy: %v", err)
	}
	return terminal
}

// ensureRefHashLabel puts the template-ref-hash label on the template itself.
func (r *Reconciler) ensureRefHashLabel(ctx context.Context, tpl *extensionsv1beta1.SandboxTemplate) error {
	want := blueprint.TemplateRefHash(tpl.Name)
	if tpl.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] == want {
		return nil
	}
	orig := tpl.DeepCopy()
	if tpl.Labels == nil {
		tpl.Labels = map[string]string{}
	}
	tpl.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] = want
	if err := r.client.Patch(ctx, tpl, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("labelling SandboxTemplate %q with its reference hash: %w", tpl.Name, err)
	}
	return nil
}

// applyPolicy creates the template's policy, or updates it when it differs.
func (r *Reconciler) applyPolicy(ctx context.Context, tpl *extensionsv1beta1.SandboxTemplate, want *networkingv1.NetworkPolicy) error {
	have := &networkingv1.NetworkPolicy{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: want.Namespace, Name: want.Name}, have)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating NetworkPolicy %q of SandboxTemplate %q: %w", want.Name, tpl.Name, err)
		}
		ctrl.LoggerFrom(ctx).V(2).Info("Created NetworkPolicy", "template", klog.KObj(tpl), "networkPolicy", want.Name)
		return nil
	case err != nil:
		return fmt.Errorf("reading NetworkPolicy %q of SandboxTemplate %q: %w", want.Name, tpl.Name, err)
	}
	if kube.OwnershipOf(have, tpl.UID) != kube.OwnedByUs {
		err := fmt.Errorf("refusing to update NetworkPolicy %q as it is not controlled by SandboxTemplate %q (its controller is %s); delete or rename it",
			have.Name, tpl.Name, kube.DescribeController(have))
		r.recorder.Eventf(tpl, have, corev1.EventTypeWarning, ReasonPolicyNotControlled, "Reconciling", "%s", err.Error())
		return err
	}
	if equality.Semantic.DeepEqual(have.Spec, want.Spec) {
		return nil
	}
	have.Spec = want.Spec
	if err := r.client.Update(ctx, have); err != nil {
		return fmt.Errorf("updating NetworkPolicy %q of SandboxTemplate %q: %w", want.Name, tpl.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Updated NetworkPolicy", "template", klog.KObj(tpl), "networkPolicy", want.Name)
	return nil
}

// deleteControlledPolicy removes the template's policy called name when the template controls it.
func (r *Reconciler) deleteControlledPolicy(ctx context.Context, tpl *extensionsv1beta1.SandboxTemplate, name string) error {
	have := &networkingv1.NetworkPolicy{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: tpl.Namespace, Name: name}, have); err != nil {
		return client.IgnoreNotFound(err)
	}
	if kube.OwnershipOf(have, tpl.UID) != kube.OwnedByUs {
		return nil
	}
	if err := r.client.Delete(ctx, have, client.Preconditions{UID: &have.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NetworkPolicy %q of SandboxTemplate %q: %w", have.Name, tpl.Name, err)
	}
	return nil
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&extensionsv1beta1.SandboxTemplate{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.allTemplates), builder.WithPredicates(nodeAddressesChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.Workers}).
		Named("sandboxtemplate").
		Complete(r)
}
