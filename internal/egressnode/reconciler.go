package egressnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/egress"
	"github.com/paddock-dev/paddock/internal/egresspolicy"
	"github.com/paddock-dev/paddock/internal/egressproxy"
)

// secretRefresh is how often a policy with inject rules re-reads its Secrets, so a rotated
// credential reaches the proxy without a Pod change (Secrets are read, never watched).
const secretRefresh = time.Minute

// retryRejected is how soon a policy that could not be applied is tried again: a Secret created
// just after the Pod (as the E2B front door or a user may) takes effect without a Pod change.
const retryRejected = 5 * time.Second

// Proxy is what the reconciler drives: egressproxy.Server.
type Proxy interface {
	Set(addr netip.Addr, sb *egressproxy.Sandbox)
	Delete(addr netip.Addr)
}

// Firewall polices exactly the given addresses: IPTables.
type Firewall interface {
	Sync(ctx context.Context, addrs []netip.Addr) error
}

// Reconciler keeps the proxy and the firewall in line with the policed Pods of one node.
type Reconciler struct {
	// Client reads Pods (from a cache holding this node's Pods) and patches their annotations.
	Client client.Client
	// Secrets reads the Secrets inject rules name, straight from the API server.
	Secrets client.Reader
	Proxy   Proxy
	Rules   Firewall

	mu      sync.Mutex
	applied map[types.NamespacedName]applied
	// seeded is set once the first pass has put every policed Pod of the node under the
	// firewall (seed).
	seeded bool
}

// applied is what is in force for one Pod.
type applied struct {
	addrs []netip.Addr
	// closed says it is the no-egress stand-in for a first policy that could not be applied.
	closed bool
}

// Reconcile applies one Pod's policy.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.seed(ctx); err != nil {
		return ctrl.Result{}, err
	}
	var pod corev1.Pod
	err := r.Client.Get(ctx, req.NamespacedName, &pod)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	annotation, addrs, policed := policedAddrs(&pod)
	if apierrors.IsNotFound(err) || !policed {
		return ctrl.Result{}, r.forget(ctx, req.NamespacedName)
	}
	id := sandboxID(&pod)
	sb, applyErr := r.build(ctx, &pod, id, annotation)
	before := r.appliedTo(req.NamespacedName)
	prev := before.addrs
	kept := applyErr != nil && len(prev) > 0 && sameAddrs(prev, addrs) && !before.closed
	switch {
	case applyErr == nil:
		r.set(req.NamespacedName, applied{addrs: addrs}, sb)
	case !kept:
		// Nothing in force for these addresses yet: fail closed until the policy can be applied.
		deny, _ := egresspolicy.Compile(egress.Policy{Deny: []string{egress.AllTraffic}})
		r.set(req.NamespacedName, applied{addrs: addrs, closed: true}, &egressproxy.Sandbox{ID: id, Policy: deny})
	}
	for _, old := range prev {
		if !slices.Contains(addrs, old) {
			r.Proxy.Delete(old)
		}
	}
	if err := r.Rules.Sync(ctx, r.allAddrs()); err != nil {
		return ctrl.Result{}, fmt.Errorf("firewall: %w", err)
	}
	st := egress.Status{Policy: egresspolicy.Hash(annotation), Applied: applyErr == nil}
	if applyErr != nil {
		st.Message = applyErr.Error()
		if kept {
			st.Message += "; the previous policy stays in force"
		} else {
			st.Message += "; the Pod has no egress until it is fixed"
		}
		ctrl.LoggerFrom(ctx).Info("egress policy not applied", "pod", klog.KObj(&pod), "err", applyErr.Error())
	}
	if err := r.report(ctx, &pod, st); err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case applyErr != nil:
		return ctrl.Result{RequeueAfter: retryRejected}, nil
	case sb.Policy.HasInject():
		return ctrl.Result{RequeueAfter: secretRefresh}, nil
	}
	return ctrl.Result{}, nil
}

// seed runs before the first Reconcile of a (re)started component: every firewall write
// replaces the whole rule set, so a first write holding only the first Pod reconciled would
// open every other policed Pod, whose chains the previous run left closed, until its own turn.
// Instead every policed Pod in the cache starts with no egress, in one write.
func (r *Reconciler) seed(ctx context.Context) error {
	r.mu.Lock()
	done := r.seeded
	r.mu.Unlock()
	if done {
		return nil
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods); err != nil {
		return fmt.Errorf("listing the node's Pods before the first firewall write: %w", err)
	}
	deny, _ := egresspolicy.Compile(egress.Policy{Deny: []string{egress.AllTraffic}})
	for i := range pods.Items {
		pod := &pods.Items[i]
		_, addrs, policed := policedAddrs(pod)
		if !policed {
			continue
		}
		r.set(client.ObjectKeyFromObject(pod), applied{addrs: addrs, closed: true}, &egressproxy.Sandbox{ID: sandboxID(pod), Policy: deny})
	}
	if err := r.Rules.Sync(ctx, r.allAddrs()); err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	r.mu.Lock()
	r.seeded = true
	r.mu.Unlock()
	return nil
}

// build reads the policy and the Secret values its inject rules name.
func (r *Reconciler) build(ctx context.Context, pod *corev1.Pod, id, annotation string) (*egressproxy.Sandbox, error) {
	pol, err := egresspolicy.Parse(annotation)
	if err != nil {
		return nil, err
	}
	sb := &egressproxy.Sandbox{ID: id, Policy: pol, Secrets: map[egress.SecretKeyRef]string{}}
	for i, rule := range pol.Spec().Inject {
		for j, h := range rule.Headers {
			ref := h.SecretKeyRef
			if _, done := sb.Secrets[ref]; done {
				continue
			}
			var s corev1.Secret
			if err := r.Secrets.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, &s); err != nil {
				return nil, fmt.Errorf("%s: inject[%d].headers[%d].secretKeyRef: Secret %q in namespace %q: %w", egress.PolicyAnnotation, i, j, ref.Name, pod.Namespace, err)
			}
			v, ok := s.Data[ref.Key]
			if !ok {
				return nil, fmt.Errorf("%s: inject[%d].headers[%d].secretKeyRef: Secret %q has no key %q", egress.PolicyAnnotation, i, j, ref.Name, ref.Key)
			}
			sb.Secrets[ref] = string(v)
		}
	}
	return sb, nil
}

// report writes st on the Pod when it differs from what is there.
func (r *Reconciler) report(ctx context.Context, pod *corev1.Pod, st egress.Status) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if pod.Annotations[egress.StatusAnnotation] == string(b) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{egress.StatusAnnotation: string(b)}}})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reporting the egress status on pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) error {
	r.mu.Lock()
	prev, ok := r.applied[key]
	delete(r.applied, key)
	r.mu.Unlock()
	if !ok {
		return nil
	}
	// The firewall first, so no redirected connection arrives for an address the proxy forgot.
	if err := r.Rules.Sync(ctx, r.allAddrs()); err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	for _, a := range prev.addrs {
		r.Proxy.Delete(a)
	}
	return nil
}

func (r *Reconciler) set(key types.NamespacedName, a applied, sb *egressproxy.Sandbox) {
	for _, addr := range a.addrs {
		r.Proxy.Set(addr, sb)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.applied == nil {
		r.applied = map[types.NamespacedName]applied{}
	}
	r.applied[key] = a
}

func (r *Reconciler) appliedTo(key types.NamespacedName) applied {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied[key]
}

func (r *Reconciler) allAddrs() []netip.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []netip.Addr
	for _, a := range r.applied {
		out = append(out, a.addrs...)
	}
	return out
}

// policedAddrs is the policy and the addresses of a Pod the component polices: one that carries
// the annotation, has an address and is neither deleted nor finished.
func policedAddrs(pod *corev1.Pod) (annotation string, addrs []netip.Addr, policed bool) {
	annotation, policed = pod.Annotations[egress.PolicyAnnotation]
	addrs = podAddrs(pod)
	if !policed || !pod.DeletionTimestamp.IsZero() || len(addrs) == 0 ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return "", nil, false
	}
	return annotation, addrs, true
}

func podAddrs(pod *corev1.Pod) []netip.Addr {
	if pod.Spec.HostNetwork {
		return nil // the node's own address: never policed this way
	}
	var out []netip.Addr
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	if len(out) == 0 && pod.Status.PodIP != "" {
		if a, err := netip.ParseAddr(pod.Status.PodIP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

func sandboxID(pod *corev1.Pod) string {
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "Sandbox" {
		return pod.Namespace + "/" + ref.Name
	}
	return pod.Namespace + "/" + pod.Name
}

func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// SetupWithManager registers the reconciler for the Pods mgr's cache holds (the caller limits
// it to this node's).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Named("egress").Complete(r)
}
