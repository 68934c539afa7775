package egressnode

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// The component's own chains, and the built-in chains that jump to them first.
const (
	NATChain     = "PADDOCK-EGRESS"
	InputChain   = "PADDOCK-EGRESS-IN"
	ForwardChain = "PADDOCK-EGRESS-FWD"
)

// Jump is a rule in a built-in chain that sends traffic to one of the component's chains.
type Jump struct {
	Table, Chain, Target string
}

// Jumps are inserted first in their built-in chains, ahead of kube-proxy and NetworkPolicy.
// The drops live in the mangle table, which the kernel walks before filter: a NetworkPolicy
// implementation that ACCEPTs a Pod's allowed traffic in filter (kube-router does, and re-inserts
// its jump first) would otherwise let UDP and ICMP out before these chains are reached.
var Jumps = []Jump{
	{"nat", "PREROUTING", NATChain},
	{"mangle", "INPUT", InputChain},
	{"mangle", "FORWARD", ForwardChain},
}

// Ports are where the proxy listens on the node.
type Ports struct {
	// Proxy takes every TCP connection of a policed Pod.
	Proxy uint16
	// DNS takes its DNS, over UDP and TCP.
	DNS uint16
}

// Render is the iptables-restore input (for --noflush) that sets the component's chains to
// police addrs: nat redirects their DNS and TCP to the proxy; mangle lets them reach only the
// proxy's ports on the node and drops everything else they start (UDP, ICMP, connections opened
// before the policy). Replies to connections others opened to the Pod (probes, the router)
// pass. Declaring a chain flushes it, so each call replaces the whole rule set atomically.
func Render(addrs []netip.Addr, p Ports) string {
	ips := slices.Clone(addrs)
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	var b strings.Builder
	fmt.Fprintf(&b, "*nat\n:%s - [0:0]\n", NATChain)
	for _, ip := range ips {
		if !ip.Is4() {
			continue
		}
		s := ip.String() + "/32"
		fmt.Fprintf(&b, "-A %s -s %s -p udp --dport 53 -j REDIRECT --to-ports %d\n", NATChain, s, p.DNS)
		fmt.Fprintf(&b, "-A %s -s %s -p tcp --dport 53 -j REDIRECT --to-ports %d\n", NATChain, s, p.DNS)
		fmt.Fprintf(&b, "-A %s -s %s -p tcp -j REDIRECT --to-ports %d\n", NATChain, s, p.Proxy)
	}
	fmt.Fprintf(&b, "COMMIT\n*mangle\n:%s - [0:0]\n:%s - [0:0]\n", InputChain, ForwardChain)
	for _, ip := range ips {
		if !ip.Is4() {
			continue
		}
		s := ip.String() + "/32"
		fmt.Fprintf(&b, "-A %s -s %s -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT\n", InputChain, s)
		fmt.Fprintf(&b, "-A %s -s %s -p tcp --dport %d -j ACCEPT\n", InputChain, s, p.Proxy)
		fmt.Fprintf(&b, "-A %s -s %s -p udp --dport %d -j ACCEPT\n", InputChain, s, p.DNS)
		fmt.Fprintf(&b, "-A %s -s %s -p tcp --dport %d -j ACCEPT\n", InputChain, s, p.DNS)
		fmt.Fprintf(&b, "-A %s -s %s -j DROP\n", InputChain, s)
		fmt.Fprintf(&b, "-A %s -s %s -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT\n", ForwardChain, s)
		fmt.Fprintf(&b, "-A %s -s %s -j DROP\n", ForwardChain, s)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Render6 is Render for ip6tables: a policed Pod's IPv6 addresses get nothing but replies.
func Render6(addrs []netip.Addr) string {
	ips := slices.Clone(addrs)
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	var b strings.Builder
	fmt.Fprintf(&b, "*mangle\n:%s - [0:0]\n:%s - [0:0]\n", InputChain, ForwardChain)
	for _, ip := range ips {
		if ip.Is4() {
			continue
		}
		s := ip.String() + "/128"
		for _, chain := range []string{InputChain, ForwardChain} {
			fmt.Fprintf(&b, "-A %s -s %s -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT\n", chain, s)
			fmt.Fprintf(&b, "-A %s -s %s -j DROP\n", chain, s)
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}
