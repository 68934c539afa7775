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
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/serviceports"
)

// Source says where an endpoint came from; it is logged and bounded, so usable as a label.
type Source string

const (
	// SourcePodIP is the X-Sandbox-Pod-IP header, once it matched the Sandbox's own address.
	SourcePodIP Source = "pod-ip"
	// SourceSandbox is status.podIPs of a Ready Sandbox in the informer cache.
	SourceSandbox Source = "sandbox"
	// SourceServiceFQDN is status.serviceFQDN of a Ready Sandbox that reports no pod IP.
	SourceServiceFQDN Source = "service-fqdn"
	// SourceDNS is <name>.<namespace>.svc.<cluster domain>, used when no informer runs
	// (--insecure-dns-routing).
	SourceDNS Source = "dns"
)

// Endpoint is where to send a request.
type Endpoint struct {
	// Host is an IP literal or a DNS name.
	Host   string
	Port   int
	Source Source
	// UID is the Sandbox's UID, from which its token derives; empty for SourceDNS.
	UID types.UID
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
	ReasonNotFound = "not_found"
	ReasonNotReady = "not_ready"
	// ReasonSuspended: the Sandbox's operatingMode is Suspended (the router may wake it).
	ReasonSuspended   = "suspended"
	ReasonWarmPool    = "unclaimed"
	ReasonNoAddress   = "no_address"
	ReasonUnavailable = "cache_unavailable"
	// ReasonPortNotDeclared: the port is not a containerPort of the Sandbox's pod template.
	ReasonPortNotDeclared = "port_not_declared"
	// ReasonPodIPMismatch: X-Sandbox-Pod-IP is not an address of the named Sandbox.
	ReasonPodIPMismatch = "pod_ip_mismatch"
	// ReasonPodIPUnverifiable: X-Sandbox-Pod-IP without a Sandbox cache to check it against.
	ReasonPodIPUnverifiable = "pod_ip_unverifiable"
)

// FromSandbox decides where a request for t goes, given the Sandbox the cache holds under t's
// namespace and name (nil when there is none). Only a Ready Sandbox that is not a warm-pool
// member is routable (claimed Sandboxes and bare ones made without a pool), only on a port its
// pod template declares, and an X-Sandbox-Pod-IP header only when it is one of the Sandbox's own
// addresses. Otherwise the first dialable pod IP wins, then the Sandbox's Service DNS name.
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
	if sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended {
		return Endpoint{}, &Error{Status: http.StatusServiceUnavailable, Reason: ReasonSuspended,
			Detail: fmt.Sprintf("Sandbox %q in namespace %q is suspended; set spec.operatingMode to Running to resume it.", t.Name, t.Namespace)}
	}
	if ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		reason := "no Ready condition yet"
		if ready != nil {
			reason = "Ready is " + string(ready.Status) + ", reason " + ready.Reason
		}
		return Endpoint{}, &Error{Status: http.StatusServiceUnavailable, Reason: ReasonNotReady,
			Detail: fmt.Sprintf("Sandbox %q in namespace %q is not ready (%s); retry once it is Ready.", t.Name, t.Namespace, reason)}
	}
	if !DeclaresPort(sb, t.Port) {
		return Endpoint{}, &Error{Status: http.StatusForbidden, Reason: ReasonPortNotDeclared,
			Detail: fmt.Sprintf("Port %d is not a containerPort of Sandbox %q in namespace %q; the router reaches only ports the sandbox's pod template declares.", t.Port, t.Name, t.Namespace)}
	}
	if t.PodIP.IsValid() {
		return fromPodIPHeader(sb, t)
	}
	for _, raw := range sb.Status.PodIPs {
		if ip, err := netip.ParseAddr(raw); err == nil && ip.Zone() == "" && headers.Dialable(ip, p) {
			return Endpoint{Host: ip.Unmap().String(), Port: t.Port, Source: SourceSandbox, UID: sb.UID}, nil
		}
	}
	if sb.Status.ServiceFQDN != "" {
		return Endpoint{Host: sb.Status.ServiceFQDN, Port: t.Port, Source: SourceServiceFQDN, UID: sb.UID}, nil
	}
	return Endpoint{}, &Error{Status: http.StatusBadGateway, Reason: ReasonNoAddress,
		Detail: fmt.Sprintf("Sandbox %q in namespace %q is Ready but reports no usable pod IP and no Service.", t.Name, t.Namespace)}
}

// fromPodIPHeader honours X-Sandbox-Pod-IP only when it names one of sb's own pod IPs, so the
// header can pick among a Sandbox's addresses but never point the router anywhere else.
func fromPodIPHeader(sb *agentsv1beta1.Sandbox, t headers.Target) (Endpoint, *Error) {
	for _, raw := range sb.Status.PodIPs {
		if ip, err := netip.ParseAddr(raw); err == nil && ip.Unmap() == t.PodIP {
			return Endpoint{Host: t.PodIP.String(), Port: t.Port, Source: SourcePodIP, UID: sb.UID}, nil
		}
	}
	return Endpoint{}, &Error{Status: http.StatusForbidden, Reason: ReasonPodIPMismatch,
		Detail: fmt.Sprintf("X-Sandbox-Pod-IP %s is not an address of Sandbox %q in namespace %q; drop the header or send one of the sandbox's status.podIPs.", t.PodIP, t.Name, t.Namespace)}
}

// DeclaresPort reports whether a container of sb's pod template, or one of its sidecars
// (restartable init containers), declares port as a TCP containerPort.
func DeclaresPort(sb *agentsv1beta1.Sandbox, port int) bool {
	return serviceports.DeclaresTCP(&sb.Spec.PodTemplate.Spec, port)
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

// FromDNS is the address of the Sandbox's conventional Service name, used without an informer
// (--insecure-dns-routing). Nothing checks that the name is a Ready, claimed Sandbox or that the
// port is declared, and a pod-IP header cannot be checked at all, so it is refused.
func FromDNS(t headers.Target, clusterDomain string) (Endpoint, *Error) {
	if t.PodIP.IsValid() {
		return Endpoint{}, &Error{Status: http.StatusForbidden, Reason: ReasonPodIPUnverifiable,
			Detail: "X-Sandbox-Pod-IP is not accepted: this router runs without a Sandbox cache and cannot check the address; drop the header."}
	}
	return Endpoint{Host: t.Name + "." + t.Namespace + ".svc." + clusterDomain, Port: t.Port, Source: SourceDNS}, nil
}

// Lookup finds a Sandbox by namespace and name; it returns nil and no error when there is none.
type Lookup interface {
	Sandbox(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error)
}

// lookupTimeout bounds one cache read.
const lookupTimeout = 10 * time.Second

// Resolver picks the endpoint for a request from the Sandbox in the cache, or, when Lookup is nil
// (--insecure-dns-routing), from the conventional DNS name.
type Resolver struct {
	Lookup        Lookup
	ClusterDomain string
	Policy        headers.Policy
}

// Resolve returns the endpoint for t or the error to answer with.
func (r *Resolver) Resolve(ctx context.Context, t headers.Target) (Endpoint, *Error) {
	if r.Lookup == nil {
		return FromDNS(t, r.ClusterDomain)
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
