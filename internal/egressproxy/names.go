package egressproxy

import (
	"net/netip"
	"strings"
	"sync"
	"time"
)

// minRemember is how long an address a name resolved to stays accepted for that name, however
// short the record's TTL: clients cache answers longer than they should.
const minRemember = 10 * time.Minute

// maxNames bounds the memory of names; past it, expired entries are dropped, then all.
const maxNames = 65536

// names remembers which addresses each name resolved to, for the destination check of domain
// rules. It is fed by the answers the egress DNS gives and by the proxy's own lookups.
type names struct {
	mu sync.Mutex
	m  map[string]map[netip.Addr]time.Time
}

func (n *names) add(name string, ttl time.Duration, addrs ...netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	until := time.Now().Add(max(ttl, minRemember))
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]map[netip.Addr]time.Time{}
	}
	if len(n.m) >= maxNames {
		n.pruneLocked()
	}
	set := n.m[name]
	if set == nil {
		set = map[netip.Addr]time.Time{}
		n.m[name] = set
	}
	for _, a := range addrs {
		set[a.Unmap()] = until
	}
}

func (n *names) has(name string, a netip.Addr) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	until, ok := n.m[name][a.Unmap()]
	return ok && time.Now().Before(until)
}

func (n *names) pruneLocked() {
	now := time.Now()
	for name, set := range n.m {
		for a, until := range set {
			if !now.Before(until) {
				delete(set, a)
			}
		}
		if len(set) == 0 {
			delete(n.m, name)
		}
	}
	if len(n.m) >= maxNames {
		clear(n.m)
	}
}

// hostName is the name a Host header or SNI carries: lowercase, without port, brackets or
// trailing dot; "" for an address literal, which names nothing.
func hostName(host string) string {
	h := strings.TrimSpace(host)
	if strings.HasPrefix(h, "[") {
		return "" // an IPv6 literal
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if _, err := netip.ParseAddr(h); err == nil {
		return ""
	}
	return h
}
