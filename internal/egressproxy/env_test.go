package egressproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/paddock-dev/paddock/api/egress"
	"github.com/paddock-dev/paddock/internal/egresspolicy"
)

// The test internet lives on loopback: hosts on 127.0.1.0/24, sandboxes' source addresses on
// 127.0.2.0/24, and 127.0.1.99 stands for a cluster address (always denied).
const clusterAddr = "127.0.1.99"

// env is an egress Server on loopback with a resolver and named hosts behind it.
type env struct {
	t        testing.TB
	srv      *Server
	proxy    string // the TCP proxy's address
	dns      string // the DNS server's UDP address
	dnsTCP   string // and its TCP address
	book     *dstBook
	zone     *zone
	publicCA *CA // the hosts' own chain, which the proxy trusts
	egressCA *CA // the installation's CA, which sandboxes trust
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, book: &dstBook{m: map[string]chan netip.AddrPort{}}, zone: &zone{m: map[string][]netip.Addr{}, asked: map[string]int{}}}
	var err error
	if e.publicCA, err = NewCA("test public root"); err != nil {
		t.Fatal(err)
	}
	if e.egressCA, err = NewCA("paddock egress test"); err != nil {
		t.Fatal(err)
	}
	upstream := e.zone.serve(t)
	always, err := egresspolicy.AlwaysDeny(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Loopback is the test's internet; keep the rest of the always-denied ranges, plus one
	// address standing for the cluster.
	var deny egresspolicy.Ranges
	for _, p := range always {
		if !p.Contains(netip.MustParseAddr("127.0.0.1")) {
			deny = append(deny, p)
		}
	}
	deny = append(deny, netip.MustParsePrefix(clusterAddr+"/32"))
	e.srv, err = New(Config{
		AlwaysDeny:  deny,
		OriginalDst: e.book.originalDst,
		UpstreamDNS: upstream,
		RootCAs:     e.publicCA.Pool(),
		CA:          e.egressCA,
		PeekTimeout: 300 * time.Millisecond,
		Log:         logFor(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	l := listen(t, "tcp", "127.0.0.1:0")
	go func() { _ = e.srv.Serve(l) }()
	e.proxy = l.Addr().String()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() { _ = e.srv.ServeDNS(pc) }()
	e.dns = pc.LocalAddr().String()
	dl := listen(t, "tcp", "127.0.0.1:0")
	go func() { _ = e.srv.ServeDNSStream(dl) }()
	e.dnsTCP = dl.Addr().String()
	return e
}

// logFor logs decisions in tests and nothing in benchmarks.
func logFor(t testing.TB) logr.Logger {
	if _, bench := t.(*testing.B); bench {
		return logr.Discard()
	}
	return testr.NewWithInterface(t, testr.Options{Verbosity: 1})
}

func listen(t testing.TB, network, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// sandbox registers a sandbox at src with policy (JSON) and secrets.
func (e *env) sandbox(src, policy string, secrets map[egress.SecretKeyRef]string) *pod {
	e.t.Helper()
	p, err := egresspolicy.Parse(policy)
	if err != nil {
		e.t.Fatal(err)
	}
	addr := netip.MustParseAddr(src)
	e.srv.Set(addr, &Sandbox{ID: "ns/" + src, Policy: p, Secrets: secrets})
	return &pod{e: e, src: addr}
}

// dstBook stands in for the kernel's SO_ORIGINAL_DST: a test client records where it meant to
// go, keyed by its own address, right after it connects to the proxy.
type dstBook struct {
	mu sync.Mutex
	m  map[string]chan netip.AddrPort
}

func (b *dstBook) entry(local string) chan netip.AddrPort {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m[local] == nil {
		b.m[local] = make(chan netip.AddrPort, 1)
	}
	return b.m[local]
}

func (b *dstBook) put(local string, dst netip.AddrPort) { b.entry(local) <- dst }

func (b *dstBook) originalDst(c net.Conn) (netip.AddrPort, error) {
	select {
	case dst := <-b.entry(c.RemoteAddr().String()):
		return dst, nil
	case <-time.After(10 * time.Second):
		return netip.AddrPort{}, errors.New("no destination recorded")
	}
}

// zone is the test's upstream resolver: authoritative for the names it holds, NXDOMAIN for
// the rest, counting every question so tests can show one never left the proxy.
type zone struct {
	mu    sync.Mutex
	m     map[string][]netip.Addr
	asked map[string]int
}

func (z *zone) add(name string, addrs ...string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, a := range addrs {
		z.m[name] = append(z.m[name], netip.MustParseAddr(a))
	}
}

func (z *zone) questions(name string) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.asked[name]
}

func (z *zone) serve(t testing.TB) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var m dnsmessage.Message
			if m.Unpack(buf[:n]) != nil || len(m.Questions) != 1 {
				continue
			}
			q := m.Questions[0]
			name := strings.TrimSuffix(q.Name.String(), ".")
			z.mu.Lock()
			z.asked[name]++
			addrs, ok := z.m[name]
			z.mu.Unlock()
			m.Response, m.RecursionAvailable = true, true
			if !ok {
				m.RCode = dnsmessage.RCodeNameError
			}
			for _, a := range addrs {
				if q.Type == dnsmessage.TypeA {
					m.Answers = append(m.Answers, dnsmessage.Resource{
						Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 30},
						Body:   &dnsmessage.AResource{A: a.As4()},
					})
				}
			}
			out, _ := m.Pack()
			_, _ = pc.WriteTo(out, from)
		}
	}()
	return pc.LocalAddr().String()
}

// host is a named server on the test internet recording every request it gets.
type host struct {
	name string
	ip   string
	http string // port of plain HTTP
	tls  string // port of HTTPS
	mu   sync.Mutex
	seen []*http.Request
}

// addHost starts HTTP and HTTPS on ip for name, with a certificate from the public CA for
// certName, and puts name in the zone.
func (e *env) addHost(name, ip, certName string) *host {
	e.t.Helper()
	return e.addHostWith(name, ip, certName, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, "hello from %s\n", name)
	})
}

// addHostWith is addHost with the host's own response.
func (e *env) addHostWith(name, ip, certName string, respond http.HandlerFunc) *host {
	e.t.Helper()
	h := &host{name: name, ip: ip}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, r.Clone(context.Background()))
		h.mu.Unlock()
		respond(w, r)
	})
	l := listen(e.t, "tcp", ip+":0")
	h.http = portOf(l)
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(l) }()
	leaf, err := e.publicCA.Leaf(certName)
	if err != nil {
		e.t.Fatal(err)
	}
	ts := listen(e.t, "tcp", ip+":0")
	h.tls = portOf(ts)
	hts := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hts.Serve(tls.NewListener(ts, &tls.Config{Certificates: []tls.Certificate{*leaf}})) }()
	e.t.Cleanup(func() { _ = hs.Close(); _ = hts.Close() })
	if name != "" {
		e.zone.add(name, ip)
	}
	return h
}

func (h *host) requests() []*http.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*http.Request(nil), h.seen...)
}

func portOf(l net.Listener) string {
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// pod is a sandbox's view: its DNS goes to the egress DNS, its connections to the proxy, as
// the node's redirect makes them.
type pod struct {
	e   *env
	src netip.Addr
}

func (p *pod) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		if strings.HasPrefix(network, "udp") {
			d := net.Dialer{LocalAddr: &net.UDPAddr{IP: p.src.AsSlice()}}
			return d.DialContext(ctx, network, p.e.dns)
		}
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: p.src.AsSlice()}}
		return d.DialContext(ctx, network, p.e.dnsTCP)
	}}
}

// dial connects to addr (a name or an address, with a port) the way a pod would: resolve,
// then connect, landing on the proxy.
func (p *pod) dial(ctx context.Context, addr string) (net.Conn, error) {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		ips, err := p.resolver().LookupNetIP(ctx, "ip4", h)
		if err != nil {
			return nil, err
		}
		ip = ips[0]
	}
	return p.dialAddr(ctx, netip.AddrPortFrom(ip, mustPort(port)))
}

func (p *pod) dialAddr(ctx context.Context, dst netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: p.src.AsSlice()}}
	c, err := d.DialContext(ctx, "tcp", p.e.proxy)
	if err != nil {
		return nil, err
	}
	p.e.book.put(c.LocalAddr().String(), dst)
	return c, nil
}

func mustPort(s string) uint16 {
	var n uint16
	_, _ = fmt.Sscan(s, &n)
	return n
}

// client is an HTTP client in the pod trusting roots; nil roots trust the public CA only.
func (p *pod) client(roots *x509.CertPool) *http.Client {
	if roots == nil {
		roots = p.e.publicCA.Pool()
	}
	return &http.Client{Transport: &http.Transport{
		DialContext:     func(ctx context.Context, _, addr string) (net.Conn, error) { return p.dial(ctx, addr) },
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}, Timeout: 20 * time.Second}
}

// get fetches url, returning the status and body, or the error.
func (p *pod) get(url string, roots *x509.CertPool, header http.Header) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := p.client(roots).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
