package egressproxy

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/paddock-dev/paddock/api/egress"
	"github.com/paddock-dev/paddock/internal/egresspolicy"
)

// Config is what a Server needs from the node.
type Config struct {
	// AlwaysDeny is refused to every sandbox whatever its policy (egresspolicy.AlwaysDeny).
	AlwaysDeny egresspolicy.Ranges
	// OriginalDst is where conn was going before the node redirected it (SO_ORIGINAL_DST).
	OriginalDst func(conn net.Conn) (netip.AddrPort, error)
	// UpstreamDNS is the resolver ("ip:port") the proxy asks, for sandboxes and for itself.
	UpstreamDNS string
	// RootCAs verify the hosts the proxy opens TLS to after terminating a sandbox's TLS; nil
	// means the system's roots.
	RootCAs *x509.CertPool
	// CA signs the leaves sandboxes see for hosts whose requests get headers injected.
	CA *CA
	// Dial opens connections to destinations and to UpstreamDNS; nil means a net.Dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// PeekTimeout is how long the proxy waits for a client's first bytes (TLS ClientHello or
	// HTTP request line) before deciding on the address alone. Zero means 5s.
	PeekTimeout time.Duration
	// Log receives decisions (verbosity 1) and failures.
	Log logr.Logger
}

// Sandbox is what the proxy knows of one policed pod.
type Sandbox struct {
	// ID names the sandbox in logs ("namespace/name").
	ID string
	// Policy is its validated policy.
	Policy *egresspolicy.Policy
	// Secrets holds the value of every Secret key the policy's inject rules reference.
	Secrets map[egress.SecretKeyRef]string
}

// Server is the egress proxy and DNS server of one node.
type Server struct {
	cfg   Config
	names names

	mu        sync.Mutex
	sandboxes map[netip.Addr]*Sandbox
	conns     map[netip.Addr]map[*tracked]struct{}
}

// tracked is one open connection of a sandbox, re-decided when its policy changes.
type tracked struct {
	mu    sync.Mutex
	name  string
	dst   netip.Addr
	close func()
}

// New returns a Server with no sandboxes.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.OriginalDst == nil:
		return nil, errors.New("egressproxy: Config.OriginalDst is required")
	case cfg.UpstreamDNS == "":
		return nil, errors.New("egressproxy: Config.UpstreamDNS is required (the resolver the node uses, ip:port)")
	case cfg.CA == nil:
		return nil, errors.New("egressproxy: Config.CA is required")
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	if cfg.PeekTimeout == 0 {
		cfg.PeekTimeout = 5 * time.Second
	}
	return &Server{cfg: cfg, sandboxes: map[netip.Addr]*Sandbox{}, conns: map[netip.Addr]map[*tracked]struct{}{}}, nil
}

// Set makes sb the policy of traffic from addr. Connections already open from addr are decided
// again; those the new policy refuses are closed.
func (s *Server) Set(addr netip.Addr, sb *Sandbox) {
	addr = addr.Unmap()
	s.mu.Lock()
	s.sandboxes[addr] = sb
	open := make([]*tracked, 0, len(s.conns[addr]))
	for t := range s.conns[addr] {
		open = append(open, t)
	}
	s.mu.Unlock()
	for _, t := range open {
		t.mu.Lock()
		name, dst := t.name, t.dst
		t.mu.Unlock()
		if v := s.permit(context.Background(), sb, name, dst); !v.Allowed {
			s.cfg.Log.V(1).Info("policy change closes a connection", "sandbox", sb.ID, "name", name, "dst", dst, "rule", v.Rule)
			t.close()
		}
	}
}

// Delete forgets addr and closes its connections.
func (s *Server) Delete(addr netip.Addr) {
	addr = addr.Unmap()
	s.mu.Lock()
	delete(s.sandboxes, addr)
	open := s.conns[addr]
	delete(s.conns, addr)
	s.mu.Unlock()
	for t := range open {
		t.close()
	}
}

// Lookup is the sandbox traffic from addr is policed as, nil when none.
func (s *Server) Lookup(addr netip.Addr) *Sandbox { return s.sandbox(addr) }

func (s *Server) sandbox(addr netip.Addr) *Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sandboxes[addr.Unmap()]
}

// track registers an open connection; the returned func forgets it.
func (s *Server) track(src netip.Addr, t *tracked) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[src] == nil {
		s.conns[src] = map[*tracked]struct{}{}
	}
	s.conns[src][t] = struct{}{}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.conns[src], t)
		if len(s.conns[src]) == 0 {
			delete(s.conns, src)
		}
	}
}

// permit decides a connection to dst naming name ("" for none) under sb's policy.
func (s *Server) permit(ctx context.Context, sb *Sandbox, name string, dst netip.Addr) egresspolicy.Verdict {
	if s.cfg.AlwaysDeny.Contains(dst) {
		return egresspolicy.Verdict{Rule: "always denied (cluster, private, link-local or node range)"}
	}
	resolves := name != "" && sb.Policy.Names(name) && s.resolvesTo(ctx, name, dst)
	return sb.Policy.Decide(egresspolicy.Query{Dst: dst, Name: name, NameResolvesToDst: resolves})
}
