// Package clientpods serves tokenless requests from Pods a namespace labels as clients of its
// own sandboxes: the router's half of the upstream-unauthenticated-migration profile. A request
// is admitted when its source address is the pod IP of a running Pod that carries the labels, is
// in the namespace of the sandbox the request names, is not itself a sandbox and does not share
// its node's network. Everything else goes to the configured authorizer. It trusts source
// addresses as NetworkPolicy does (docs/compatibility.md, "Install profiles").
package clientpods

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/internal/router/headers"
)

// podIPIndex indexes the cached Pods by every address in status.podIPs.
const podIPIndex = "status.podIPs"

// Authorizer admits tokenless requests from labelled client Pods and hands every other request
// to Next. Build it with New and run it with Start.
type Authorizer struct {
	Next     authz.Authorizer
	selector labels.Selector
	c        cache.Cache
}

// New builds the Pod cache: only Pods with the labels, in namespaces (all when empty), trimmed
// to what the decision reads. It does not start it.
func New(cfg *rest.Config, podLabels map[string]string, namespaces []string, next authz.Authorizer) (*Authorizer, error) {
	if len(podLabels) == 0 {
		return nil, errors.New("client Pod labels are empty: they would make every Pod a client; set --unauthenticated-client-pod-labels to k=v")
	}
	selector := labels.SelectorFromSet(podLabels)
	scheme := k8sruntime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion})
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	opts := cache.Options{Scheme: scheme, Mapper: mapper,
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: selector, Transform: trimPod}}}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the client Pod cache: %w", err)
	}
	if err := c.IndexField(context.Background(), &corev1.Pod{}, podIPIndex, func(o client.Object) []string {
		var ips []string
		for _, ip := range o.(*corev1.Pod).Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return ips
	}); err != nil {
		return nil, fmt.Errorf("indexing client Pods by address: %w", err)
	}
	return &Authorizer{Next: next, selector: selector, c: c}, nil
}

// Start runs the Pod informer until ctx ends.
func (a *Authorizer) Start(ctx context.Context) error { return a.c.Start(ctx) }

// WaitForSync blocks until the initial list is in or ctx ends, and reports which.
func (a *Authorizer) WaitForSync(ctx context.Context) bool { return a.c.WaitForCacheSync(ctx) }

// Authorize implements authz.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, r *http.Request, t headers.Target) error {
	if r.Header.Get("Authorization") != "" {
		return a.Next.Authorize(ctx, r, t)
	}
	ip, err := sourceIP(r)
	if err != nil {
		return a.Next.Authorize(ctx, r, t)
	}
	var pods corev1.PodList
	if err := a.c.List(ctx, &pods, client.MatchingFields{podIPIndex: ip.String()}); err != nil {
		return fmt.Errorf("looking up client Pods at %s: %w", ip, err)
	}
	var why []string
	for i := range pods.Items {
		p := &pods.Items[i]
		reason := a.refusal(p, t)
		if reason == "" {
			return nil
		}
		why = append(why, fmt.Sprintf("Pod %s/%s %s", p.Namespace, p.Name, reason))
	}
	err = a.Next.Authorize(ctx, r, t)
	if len(why) > 0 && errors.Is(err, authz.ErrUnauthenticated) {
		err = fmt.Errorf("%w; the client Pod at %s is not served without a token: %v", err, ip, why)
	}
	return err
}

// refusal says why p may not reach t without a token, or "" when it may.
func (a *Authorizer) refusal(p *corev1.Pod, t headers.Target) string {
	switch {
	case p.Namespace != t.Namespace:
		return fmt.Sprintf("is a client of namespace %s, not of %s", p.Namespace, t.Namespace)
	case !a.selector.Matches(labels.Set(p.Labels)):
		return "lacks the client labels " + a.selector.String()
	case p.Labels[agentsv1beta1.SandboxNameHashLabel] != "":
		// A claim may label its sandbox's Pod; the code it runs must not become a client by that.
		return "is a sandbox"
	case p.Spec.HostNetwork:
		return "shares its node's network, whose every process has its address"
	case p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning:
		return "is not running"
	}
	return ""
}

func sourceIP(r *http.Request) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, err
	}
	ip, err := netip.ParseAddr(host)
	return ip.Unmap(), err
}

// trimPod keeps what the decision reads.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metaOf(p),
		Spec:       corev1.PodSpec{HostNetwork: p.Spec.HostNetwork},
		Status:     corev1.PodStatus{Phase: p.Status.Phase, PodIPs: p.Status.PodIPs},
	}, nil
}

func metaOf(p *corev1.Pod) (m metav1.ObjectMeta) {
	m.Name, m.Namespace, m.UID, m.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	m.Labels, m.DeletionTimestamp = p.Labels, p.DeletionTimestamp
	return m
}
