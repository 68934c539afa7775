package standin

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// TLD is the top-level domain of every stand-in name: reserved for testing (RFC 6761), so it
// resolves nowhere but here.
const TLD = "test"

// DefaultHosts are the hosts a new stand-in serves: a name and a subdomain of it (for wildcard
// rules), a second domain, and a CDN-like host.
var DefaultHosts = []string{"example.test", "api.example.test", "other.test", "cdn.test"}

// The fixed addresses of the stand-in range, as offsets from its first address.
const (
	gatewayOffset  = 1  // the host's end of the link: the stand-in's default gateway
	resolverOffset = 53 // the DNS resolver
	firstHost      = 10 // the first named host
)

// Interface names: the host's end of the link, and the namespace's.
const (
	HostInterface  = "paddock-inet"
	innerInterface = "eth0"
)

// Host is one named host of the stand-in.
type Host struct {
	Name string     `json:"name"`
	Addr netip.Addr `json:"addr"`
}

// Plan is the stand-in's addresses: the range, the host side's gateway, the resolver and the
// hosts in the order they were added.
type Plan struct {
	Network  netip.Prefix `json:"network"`
	Gateway  netip.Addr   `json:"gateway"`
	Resolver netip.Addr   `json:"resolver"`
	Hosts    []Host       `json:"hosts"`
}

// NewPlan lays out network for names. The range must be IPv4 and hold at least a /26 (the
// resolver sits at offset 53).
func NewPlan(network netip.Prefix, names []string) (Plan, error) {
	if !network.IsValid() || !network.Addr().Is4() || network.Bits() > 26 {
		return Plan{}, fmt.Errorf("stand-in network %s must be an IPv4 range of /26 or wider", network)
	}
	network = network.Masked()
	p := Plan{Network: network, Gateway: offset(network, gatewayOffset), Resolver: offset(network, resolverOffset)}
	for _, n := range names {
		if _, err := p.Add(n); err != nil {
			return Plan{}, err
		}
	}
	return p, nil
}

// Add gives name the next free address and returns it; a name already present keeps its own.
func (p *Plan) Add(name string) (Host, error) {
	name, err := CanonicalName(name)
	if err != nil {
		return Host{}, err
	}
	if h, ok := p.Lookup(name); ok {
		return h, nil
	}
	used := map[netip.Addr]bool{p.Gateway: true, p.Resolver: true}
	for _, h := range p.Hosts {
		used[h.Addr] = true
	}
	for a := offset(p.Network, firstHost); p.Network.Contains(a); a = a.Next() {
		if used[a] || !p.Network.Contains(a.Next()) { // the last address is the broadcast
			continue
		}
		h := Host{Name: name, Addr: a}
		p.Hosts = append(p.Hosts, h)
		return h, nil
	}
	return Host{}, fmt.Errorf("stand-in network %s has no free address for %s; remove hosts or give a wider range", p.Network, name)
}

// Lookup finds a host by name, case-insensitively and with or without the final dot.
func (p Plan) Lookup(name string) (Host, bool) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	i := slices.IndexFunc(p.Hosts, func(h Host) bool { return h.Name == name })
	if i < 0 {
		return Host{}, false
	}
	return p.Hosts[i], true
}

// ByAddr finds the host that owns addr.
func (p Plan) ByAddr(addr netip.Addr) (Host, bool) {
	i := slices.IndexFunc(p.Hosts, func(h Host) bool { return h.Addr == addr.Unmap() })
	if i < 0 {
		return Host{}, false
	}
	return p.Hosts[i], true
}

// CanonicalName lower-cases name, drops a final dot and checks that it is a DNS name under .test.
func CanonicalName(name string) (string, error) {
	n := strings.TrimSuffix(strings.ToLower(name), ".")
	if !strings.HasSuffix(n, "."+TLD) {
		return "", fmt.Errorf("stand-in host name %q must end in .%s (reserved for testing, so it never resolves outside this machine)", name, TLD)
	}
	if len(n) > 253 {
		return "", fmt.Errorf("stand-in host name %q is longer than 253 characters", name)
	}
	for _, label := range strings.Split(n, ".") {
		if err := checkLabel(label); err != nil {
			return "", fmt.Errorf("stand-in host name %q: %w", name, err)
		}
	}
	return n, nil
}

func checkLabel(l string) error {
	if l == "" || len(l) > 63 {
		return errors.New("each label must have 1 to 63 characters")
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Errorf("label %q must not start or end with a hyphen", l)
	}
	for _, r := range l {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return fmt.Errorf("label %q may hold only letters, digits and hyphens", l)
		}
	}
	return nil
}

func offset(p netip.Prefix, n int) netip.Addr {
	b := p.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
