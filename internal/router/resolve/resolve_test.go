package resolve

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/router/headers"
)

type sbOpt func(*agentsv1beta1.Sandbox)

// sandbox is ns/sb whose one container declares port 8888.
func sandbox(opts ...sbOpt) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: "ns", UID: "uid-1"}}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}}
	for _, o := range opts {
		o(sb)
	}
	return sb
}

func ready(status metav1.ConditionStatus, reason string) sbOpt {
	return func(sb *agentsv1beta1.Sandbox) {
		sb.Status.Conditions = append(sb.Status.Conditions, metav1.Condition{
			Type: agentsv1beta1.SandboxConditionReady, Status: status, Reason: reason})
	}
}

func podIPs(ips ...string) sbOpt {
	return func(sb *agentsv1beta1.Sandbox) { sb.Status.PodIPs = ips }
}

func fqdn(name string) sbOpt {
	return func(sb *agentsv1beta1.Sandbox) { sb.Status.ServiceFQDN = name }
}

func label(k, v string) sbOpt {
	return func(sb *agentsv1beta1.Sandbox) { sb.Labels = map[string]string{k: v} }
}

func initContainerPort(port int32, restart *corev1.ContainerRestartPolicy) sbOpt {
	return func(sb *agentsv1beta1.Sandbox) {
		sb.Spec.PodTemplate.Spec.InitContainers = append(sb.Spec.PodTemplate.Spec.InitContainers, corev1.Container{
			Name: "init", RestartPolicy: restart, Ports: []corev1.ContainerPort{{ContainerPort: port}}})
	}
}

func udpPort(port int32) sbOpt {
	return func(sb *agentsv1beta1.Sandbox) {
		c := &sb.Spec.PodTemplate.Spec.Containers[0]
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: port, Protocol: corev1.ProtocolUDP})
	}
}

func controller(apiVersion, kind string) sbOpt {
	return func(sb *agentsv1beta1.Sandbox) {
		sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "owner",
			UID: types.UID("owner-uid"), Controller: ptr.To(true)}}
	}
}

func TestFromSandbox(t *testing.T) {
	target := headers.Target{Name: "sb", Namespace: "ns", Port: 8888}
	withUID := func(uid string) headers.Target { t := target; t.UID = uid; return t }
	withPort := func(port int) headers.Target { t := target; t.Port = port; return t }
	withPodIP := func(ip string) headers.Target { t := target; t.PodIP = netip.MustParseAddr(ip); return t }
	cases := []struct {
		name       string
		sb         *agentsv1beta1.Sandbox
		target     headers.Target
		policy     headers.Policy
		want       Endpoint
		wantStatus int
		wantReason string
	}{
		{name: "ready with pod ip", sb: sandbox(ready("True", "DependenciesReady"), podIPs("198.18.0.5")),
			target: target, want: Endpoint{Host: "198.18.0.5", Port: 8888, Source: SourceSandbox, UID: "uid-1"}},
		{name: "undeclared port", sb: sandbox(ready("True", ""), podIPs("198.18.0.5")),
			target: withPort(10250), wantStatus: http.StatusForbidden, wantReason: ReasonPortNotDeclared},
		{name: "udp port is not a tcp port", sb: sandbox(ready("True", ""), podIPs("198.18.0.5"), udpPort(53)),
			target: withPort(53), wantStatus: http.StatusForbidden, wantReason: ReasonPortNotDeclared},
		{name: "sidecar port", sb: sandbox(ready("True", ""), podIPs("198.18.0.5"), initContainerPort(9000, ptr.To(corev1.ContainerRestartPolicyAlways))),
			target: withPort(9000), want: Endpoint{Host: "198.18.0.5", Port: 9000, Source: SourceSandbox, UID: "uid-1"}},
		{name: "a plain init container's port is gone once it ran", sb: sandbox(ready("True", ""), podIPs("198.18.0.5"), initContainerPort(9000, nil)),
			target: withPort(9000), wantStatus: http.StatusForbidden, wantReason: ReasonPortNotDeclared},
		{name: "pod ip header equal to the sandbox's second address", sb: sandbox(ready("True", ""), podIPs("198.18.0.5", "fd00::5")),
			target: withPodIP("fd00::5"), want: Endpoint{Host: "fd00::5", Port: 8888, Source: SourcePodIP, UID: "uid-1"}},
		{name: "pod ip header of another address", sb: sandbox(ready("True", ""), podIPs("198.18.0.5")),
			target: withPodIP("198.18.0.9"), wantStatus: http.StatusForbidden, wantReason: ReasonPodIPMismatch},
		{name: "pod ip header cannot reach an unclaimed member", sb: sandbox(ready("True", ""), podIPs("198.18.0.5"), label(agentsv1beta1.WarmPoolSandboxLabel, "abcd1234")),
			target: withPodIP("198.18.0.5"), wantStatus: http.StatusServiceUnavailable, wantReason: ReasonWarmPool},
		{name: "dual stack takes the first", sb: sandbox(ready("True", ""), podIPs("fd00::5", "198.18.0.5")),
			target: target, want: Endpoint{Host: "fd00::5", Port: 8888, Source: SourceSandbox, UID: "uid-1"}},
		{name: "skips an undialable pod ip", sb: sandbox(ready("True", ""), podIPs("169.254.1.1", "198.18.0.5")),
			target: target, want: Endpoint{Host: "198.18.0.5", Port: 8888, Source: SourceSandbox, UID: "uid-1"}},
		{name: "loopback pod ip refused", sb: sandbox(ready("True", ""), podIPs("127.0.0.1")),
			target: target, wantStatus: http.StatusBadGateway, wantReason: ReasonNoAddress},
		{name: "loopback pod ip allowed by test policy", sb: sandbox(ready("True", ""), podIPs("127.0.0.1")),
			target: target, policy: headers.Policy{AllowLoopback: true},
			want: Endpoint{Host: "127.0.0.1", Port: 8888, Source: SourceSandbox, UID: "uid-1"}},
		{name: "garbage pod ip falls back to the service", sb: sandbox(ready("True", ""), podIPs("nope"), fqdn("sb.ns.svc.cluster.local")),
			target: target, want: Endpoint{Host: "sb.ns.svc.cluster.local", Port: 8888, Source: SourceServiceFQDN, UID: "uid-1"}},
		{name: "no pod ip uses service fqdn", sb: sandbox(ready("True", ""), fqdn("sb.ns.svc.example.org")),
			target: target, want: Endpoint{Host: "sb.ns.svc.example.org", Port: 8888, Source: SourceServiceFQDN, UID: "uid-1"}},
		{name: "ready but nowhere to go", sb: sandbox(ready("True", "")),
			target: target, wantStatus: http.StatusBadGateway, wantReason: ReasonNoAddress},
		{name: "unknown", sb: nil, target: target, wantStatus: http.StatusNotFound, wantReason: ReasonNotFound},
		{name: "uid matches", sb: sandbox(ready("True", ""), podIPs("198.18.0.5")), target: withUID("uid-1"),
			want: Endpoint{Host: "198.18.0.5", Port: 8888, Source: SourceSandbox, UID: "uid-1"}},
		{name: "uid differs (name reused)", sb: sandbox(ready("True", ""), podIPs("198.18.0.5")), target: withUID("uid-0"),
			wantStatus: http.StatusNotFound, wantReason: ReasonNotFound},
		{name: "not ready", sb: sandbox(ready("False", "DependenciesNotReady"), podIPs("198.18.0.5")),
			target: target, wantStatus: http.StatusServiceUnavailable, wantReason: ReasonNotReady},
		{name: "no conditions", sb: sandbox(podIPs("198.18.0.5")),
			target: target, wantStatus: http.StatusServiceUnavailable, wantReason: ReasonNotReady},
		{name: "warm pool label", sb: sandbox(ready("True", ""), podIPs("198.18.0.5"), label(agentsv1beta1.WarmPoolSandboxLabel, "abcd1234")),
			target: target, wantStatus: http.StatusServiceUnavailable, wantReason: ReasonWarmPool},
		{name: "warm pool label, empty value", sb: sandbox(ready("True", ""), podIPs("198.18.0.5"), label(agentsv1beta1.WarmPoolSandboxLabel, "")),
			target: target, wantStatus: http.StatusServiceUnavailable, wantReason: ReasonWarmPool},
		{name: "owned by a warm pool without label", sb: sandbox(ready("True", ""), podIPs("198.18.0.5"),
			controller("extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool")),
			target: target, wantStatus: http.StatusServiceUnavailable, wantReason: ReasonWarmPool},
		{name: "owned by a warm pool of another version", sb: sandbox(ready("True", ""), podIPs("198.18.0.5"),
			controller("extensions.agents.x-k8s.io/v1alpha1", "SandboxWarmPool")),
			target: target, wantStatus: http.StatusServiceUnavailable, wantReason: ReasonWarmPool},
		{name: "owned by a claim is routable", sb: sandbox(ready("True", ""), podIPs("198.18.0.5"),
			controller("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim")),
			target: target, want: Endpoint{Host: "198.18.0.5", Port: 8888, Source: SourceSandbox, UID: "uid-1"}},
		{name: "a foreign kind named SandboxWarmPool is routable", sb: sandbox(ready("True", ""), podIPs("198.18.0.5"),
			controller("example.com/v1", "SandboxWarmPool")),
			target: target, want: Endpoint{Host: "198.18.0.5", Port: 8888, Source: SourceSandbox, UID: "uid-1"}},
		{name: "other label is routable", sb: sandbox(ready("True", ""), podIPs("198.18.0.5"), label(agentsv1beta1.LaunchTypeLabel, "warm")),
			target: target, want: Endpoint{Host: "198.18.0.5", Port: 8888, Source: SourceSandbox, UID: "uid-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromSandbox(tc.sb, tc.target, tc.policy)
			var gotStatus int
			var gotReason string
			if err != nil {
				gotStatus, gotReason = err.Status, err.Reason
				if err.Detail == "" {
					t.Error("error without detail")
				}
			}
			if diff := cmp.Diff([]any{tc.wantStatus, tc.wantReason}, []any{gotStatus, gotReason}); diff != "" {
				t.Fatalf("error status/reason (-want +got):\n%s\n(%v)", diff, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorDetails(t *testing.T) {
	target := headers.Target{Name: "sb", Namespace: "ns", Port: 8888}
	cases := []struct {
		name string
		sb   *agentsv1beta1.Sandbox
		want string
	}{
		{name: "unknown", want: `Sandbox "sb" not found in namespace "ns".`},
		{name: "not ready", sb: sandbox(ready("False", "DependenciesNotReady")),
			want: `Sandbox "sb" in namespace "ns" is not ready (Ready is False, reason DependenciesNotReady); retry once it is Ready.`},
	}
	for _, tc := range cases {
		_, err := FromSandbox(tc.sb, target, headers.Policy{})
		if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		if diff := cmp.Diff(tc.want, err.Detail); diff != "" {
			t.Errorf("%s: detail (-want +got):\n%s", tc.name, diff)
		}
	}
}

type lookupFunc func(ctx context.Context, ns, name string) (*agentsv1beta1.Sandbox, error)

func (f lookupFunc) Sandbox(ctx context.Context, ns, name string) (*agentsv1beta1.Sandbox, error) {
	return f(ctx, ns, name)
}

func TestResolver(t *testing.T) {
	found := lookupFunc(func(_ context.Context, ns, name string) (*agentsv1beta1.Sandbox, error) {
		if ns == "ns" && name == "sb" {
			return sandbox(ready("True", ""), podIPs("198.18.0.5")), nil
		}
		return nil, nil
	})
	broken := lookupFunc(func(context.Context, string, string) (*agentsv1beta1.Sandbox, error) {
		return nil, errors.New("cache not started")
	})
	cases := []struct {
		name       string
		r          Resolver
		target     headers.Target
		want       Endpoint
		wantStatus int
	}{
		{name: "pod ip header does not skip the lookup", r: Resolver{Lookup: broken},
			target: headers.Target{Name: "x", Namespace: "y", Port: 80, PodIP: netip.MustParseAddr("198.18.1.1")}, wantStatus: http.StatusServiceUnavailable},
		{name: "pod ip header of another address", r: Resolver{Lookup: found},
			target: headers.Target{Name: "sb", Namespace: "ns", Port: 8888, PodIP: netip.MustParseAddr("198.18.1.1")}, wantStatus: http.StatusForbidden},
		{name: "pod ip header without a cache", r: Resolver{ClusterDomain: "cluster.local"},
			target: headers.Target{Name: "x", Namespace: "y", Port: 80, PodIP: netip.MustParseAddr("fd00::1")}, wantStatus: http.StatusForbidden},
		{name: "no informer uses dns", r: Resolver{ClusterDomain: "cluster.local"},
			target: headers.Target{Name: "x", Namespace: "y", Port: 8888},
			want:   Endpoint{Host: "x.y.svc.cluster.local", Port: 8888, Source: SourceDNS}},
		{name: "informer hit", r: Resolver{Lookup: found, ClusterDomain: "cluster.local"},
			target: headers.Target{Name: "sb", Namespace: "ns", Port: 8888},
			want:   Endpoint{Host: "198.18.0.5", Port: 8888, Source: SourceSandbox, UID: "uid-1"}},
		{name: "informer hit, undeclared port", r: Resolver{Lookup: found, ClusterDomain: "cluster.local"},
			target: headers.Target{Name: "sb", Namespace: "ns", Port: 9000}, wantStatus: http.StatusForbidden},
		{name: "informer miss is not found, not dns", r: Resolver{Lookup: found, ClusterDomain: "cluster.local"},
			target: headers.Target{Name: "other", Namespace: "ns", Port: 9000}, wantStatus: http.StatusNotFound},
		{name: "lookup failure", r: Resolver{Lookup: broken},
			target: headers.Target{Name: "sb", Namespace: "ns", Port: 9000}, wantStatus: http.StatusServiceUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.r.Resolve(context.Background(), tc.target)
			gotStatus := 0
			if err != nil {
				gotStatus = err.Status
			}
			if gotStatus != tc.wantStatus {
				t.Fatalf("status = %d, want %d (%v)", gotStatus, tc.wantStatus, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostPort(t *testing.T) {
	for _, tc := range []struct {
		e    Endpoint
		want string
	}{
		{e: Endpoint{Host: "198.18.0.1", Port: 80}, want: "198.18.0.1:80"},
		{e: Endpoint{Host: "fd00::1", Port: 8888}, want: "[fd00::1]:8888"},
		{e: Endpoint{Host: "sb.ns.svc.cluster.local", Port: 1}, want: "sb.ns.svc.cluster.local:1"},
	} {
		if got := tc.e.HostPort(); got != tc.want {
			t.Errorf("HostPort(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}
