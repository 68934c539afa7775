// Package resolve turns a validated routing request into the address to dial. The decision
// (FromSandbox) is pure and table-tested; Resolver adds the lookup in an informer cache.
package resolve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/router/headers"
)

// Source says where an endpoint came from; it is logged and bounded, so usable as a label.
type Source string

const (
	// SourcePodIP is the X-Sandbox-Pod-IP header.
	SourcePodIP Source = "pod-ip"
	// SourceSandbox is status.podIPs of a Ready Sandbox in the informer cache.
	SourceSandbox Source = "sandbox"
	// SourceServiceFQDN is status.serviceFQDN of a Ready Sandbox that reports no pod IP.
	SourceServiceFQDN Source = "service-fqdn"
	// SourceDNS is <name>.<namespace>.svc.<cluster domain>, used when no informer runs.
	SourceDNS Source = "dns"
)

// Endpoint is where to send a request.
type Endpoint struct {
	// Host is an IP literal or a DNS name.
	Host   string
	Port   int
	Source Source
}

// HostPort renders the endpoint for a URL or a dial, bracketing IPv6.
func (e Endpoint) HostPort() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// Error is a resolution failure with the status and client-facing text to answer with.
type Error struct {
	Status int
	Detail string
	// Reason is a short bounded word for logs and metrics.
	Reason string
	// Cause is the underlying error, for the log only.
	Cause error
}

func (e *Error) Error() string { return e.Detail }

// Reasons of resolution errors.
const (
	ReasonNotFound    = "not_found"
	ReasonNotReady    = "not_ready"
	ReasonWarmPool    = "unclaimed"
	ReasonNoAddress   = "no_address"
	ReasonUnavailable = "cache_unavailable"
)

// FromSandbox decides where a request for t goes, given the Sandbox the cache holds under t's
// namespace and name (nil when there is none). Only a Ready Sandbox that is not an unclaimed
// warm-pool member is routable; its first dialable pod IP wins, then its Service's DNS name.
func FromSandbox(sb *agentsv1beta1.Sandbox, t headers.Target, p headers.Policy) (Endpoint, *Error) {
	if sb == nil || (t.UID != "" && string(sb.UID) != t.UID) {
		what := fmt.Sprintf("Sandbox %q not found in namespace %q.", t.Name, t.Namespace)
		if sb != nil {
			what = fmt.Sprintf("Sandbox %q with UID %q not found in namespace %q.", t.Name, t.UID, t.Namespace)
		}
		return Endpoint{}, &Error{Status: http.StatusNotFound, Reason: ReasonNotFound, Detail: what}
	}
	if IsUnclaimedWarmPoolMember(sb) {
		return Endpoint{}, &Error{Status: http.StatusServiceUnavailable, Reason: ReasonWarmPool,
			Detail: fmt.Sprintf("Sandbox %q in namespace %q is an unclaimed warm-pool member; claim it with a SandboxClaim and route to the claimed sandbox.", t.Name, t.Namespace)}
	}
	if ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		reason := "no Ready condition yet"
		if ready != nil {
			reason = "Ready is " + string(ready.Status) + ", reason " + ready.Reason
		}
		return Endpoint{}, &Error{Status: http.StatusServiceUnavailable, Reason: ReasonNotReady,
			Detail: fmt.Sprintf("Sandbox %q in namespace %q is not ready (%s); retry once it is Ready.", t.Name, t.Namespace, reason)}
	}
	for _, raw := range sb.Status.PodIPs {
		if ip, err := netip.ParseAddr(raw); err == nil && ip.Zone() == "" && headers.Dialable(ip, p) {
			return Endpoint{Host: ip.Unmap().String(), Port: t.Port, Source: SourceSandbox}, nil
		}
	}
	if sb.Status.ServiceFQDN != "" {
		return Endpoint{Host: sb.Status.ServiceFQDN, Port: t.Port, Source: SourceServiceFQDN}, nil
	}
	return Endpoint{}, &Error{Status: http.StatusBadGateway, Reason: ReasonNoAddress,
		Detail: fmt.Sprintf("Sandbox %q in namespace %q is Ready but reports no usable pod IP and no Service.", t.Name, t.Namespace)}
}

// IsUnclaimedWarmPoolMember reports whether sb still belongs to a warm pool: it carries the
// warm-pool label or its controller is a SandboxWarmPool. Adoption by a claim removes both.
func IsUnclaimedWarmPoolMember(sb *agentsv1beta1.Sandbox) bool {
	if _, ok := sb.Labels[agentsv1beta1.WarmPoolSandboxLabel]; ok {
		return true
	}
	ref := metav1.GetControllerOfNoCopy(sb)
	if ref == nil || ref.Kind != "SandboxWarmPool" {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == extensionsv1beta1.GroupVersion.Group
}

// FromDNS is the address of the Sandbox's conventional Service name, used without an informer.
func FromDNS(t headers.Target, clusterDomain string) Endpoint {
	return Endpoint{Host: t.Name + "." + t.Namespace + ".svc." + clusterDomain, Port: t.Port, Source: SourceDNS}
}

// FromPodIP is the address given by the X-Sandbox-Pod-IP header.
func FromPodIP(t headers.Target) Endpoint {
	return Endpoint{Host: t.PodIP.String(), Port: t.Port, Source: SourcePodIP}
}

// Lookup finds a Sandbox by namespace and name; it returns nil and no error when there is none.
type Lookup interface {
	Sandbox(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error)
}

// lookupTimeout bounds one cache read.
const lookupTimeout = 10 * time.Second

// Resolver picks the endpoint for a request: the pod-IP header first, then the Sandbox in the
// cache (when Lookup is set), otherwise the conventional DNS name.
type Resolver struct {
	Lookup        Lookup
	ClusterDomain string
	Policy        headers.Policy
}

// Resolve returns the endpoint for t or the error to answer with.
func (r *Resolver) Resolve(ctx context.Context, t headers.Target) (Endpoint, *Error) {
	switch {
	case t.PodIP.IsValid():
		return FromPodIP(t), nil
	case r.Lookup == nil:
		return FromDNS(t, r.ClusterDomain), nil
	}
	// Before the informer's first sync a read waits for it; never let a request wait forever
	// (for example when RBAC forbids listing Sandboxes).
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	sb, err := r.Lookup.Sandbox(ctx, t.Namespace, t.Name)
	if err != nil {
		return Endpoint{}, &Error{Status: http.StatusServiceUnavailable, Reason: ReasonUnavailable, Cause: err,
			Detail: fmt.Sprintf("Sandbox lookup for %q in namespace %q failed; retry shortly.", t.Name, t.Namespace)}
	}
	return FromSandbox(sb, t, r.Policy)
}
