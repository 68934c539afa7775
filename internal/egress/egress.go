// Package egress computes the address ranges a sandbox's default NetworkPolicy denies egress to:
// the cluster's own pod, Service and node ranges and its API server, found by discovery or
// given explicitly, plus the private and link-local ranges that are denied everywhere.
//
// Everything here is pure: no client, no context, no logging.
package egress

import (
	"fmt"
	"net/netip"
	"slices"
)

// Defaults are denied on every cluster: RFC 1918, link-local (cloud metadata), unique-local
// and link-local IPv6.
var Defaults = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "fc00::/7", "fe80::/10"}

// Discovered is what the cluster says about its own addresses. Every entry is a CIDR or a bare
// address (taken as a single host).
type Discovered struct {
	// PodCIDRs are the Nodes' spec.podCIDRs.
	PodCIDRs []string
	// NodeIPs are the Nodes' InternalIP addresses.
	NodeIPs []string
	// ServiceCIDRs are the ServiceCIDR objects' spec.cidrs (networking.k8s.io/v1).
	ServiceCIDRs []string
	// APIServerIPs are the addresses of the default/kubernetes Service's EndpointSlices.
	APIServerIPs []string
}

// Deny returns the ranges to deny, IPv4 and IPv6 apart, sorted and with every range that
// another contains dropped. explicit, when not nil, replaces discovery; the defaults always
// apply. Unparsable explicit entries are an error; unparsable discovered ones are skipped (the
// cluster's objects are validated by the API server).
func Deny(explicit []string, discovered Discovered) (v4, v6 []string, err error) {
	prefixes, err := parseAll(Defaults)
	if err != nil {
		return nil, nil, err
	}
	if explicit != nil {
		ps, err := parseAll(explicit)
		if err != nil {
			return nil, nil, err
		}
		prefixes = append(prefixes, ps...)
	} else {
		for _, group := range [][]string{discovered.PodCIDRs, discovered.NodeIPs, discovered.ServiceCIDRs, discovered.APIServerIPs} {
			for _, s := range group {
				if p, err := parse(s); err == nil {
					prefixes = append(prefixes, p)
				}
			}
		}
	}
	for _, p := range minimal(prefixes) {
		if p.Addr().Is4() {
			v4 = append(v4, p.String())
		} else {
			v6 = append(v6, p.String())
		}
	}
	return v4, v6, nil
}

// Validate reports the first entry of cidrs that is neither a CIDR nor an address.
func Validate(cidrs []string) error {
	_, err := parseAll(cidrs)
	return err
}

func parseAll(ss []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		p, err := parse(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// parse reads a CIDR (masked to its network) or a bare address (a single host).
func parse(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR (10.0.0.0/8, fd00::/8) nor an IP address", s)
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// minimal sorts prefixes (shortest first within an address) and drops those another contains.
func minimal(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var out []netip.Prefix
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].Contains(p.Addr()) && out[n-1].Bits() <= p.Bits() {
			continue
		}
		out = append(out, p)
	}
	return out
}

// RedirectAddresses are the node addresses a policed Pod's redirected traffic arrives at, as
// /32 CIDRs, sorted: iptables REDIRECT rewrites the destination to the primary address of the
// interface the packet came in on, which on the bridge CNIs paddock-egress works with (the CNI
// bridge plugin, flannel's cni0, kube-router's kube-bridge) is the node's pod gateway, the first
// host address of its IPv4 pod range. IPv6 ranges give none (nothing is redirected over IPv6),
// nor do unparsable ones or ranges too small for a gateway.
func RedirectAddresses(podCIDRs []string) []string {
	var out []string
	for _, s := range podCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
			continue
		}
		out = append(out, netip.PrefixFrom(p.Masked().Addr().Next(), 32).String())
	}
	slices.SortFunc(out, func(a, b string) int {
		return netip.MustParsePrefix(a).Addr().Compare(netip.MustParsePrefix(b).Addr())
	})
	return slices.Compact(out)
}
